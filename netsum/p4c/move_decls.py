"""MoveDeclarations: every variable is declared once, at the top of its parser or control.

Runs right after UniqueNames (whose unique names make the move safe).  Afterwards:

* a control's ``locals`` hold every variable of the control: those of its actions and of
  any block of its ``apply``, then its own (p4c's order); none has an initializer;
* a declaration with an initializer became an assignment where it stood, so the value is
  computed at that point of execution (a block re-entered later re-assigns it);
* a control-level initializer is an assignment at the start of ``apply`` (p4c
  MoveInitializers), a parser-level one runs when the parser starts: at the top of
  ``start``, or in a new start state when some state transitions back to ``start``;
* a parser's ``locals`` hold the variables of its states;
* an action or function outside any control keeps its variables, moved to the top of its
  body;
* a local ``const`` becomes a ``ConstDecl`` among the locals (its value is constant, so
  where it is evaluated does not matter).

So the apply block, parser states and action bodies contain no declarations at all: the
lowering never allocates storage while walking statements, and no name's meaning depends on
where in a block it is looked up.
"""
from __future__ import annotations

import dataclasses

from . import ast as A
from .diagnostics import Diagnostics

__all__ = ["MoveDeclarations"]


def _assign(v: A.VarDecl) -> A.Assign:
    assert v.init is not None
    return A.Assign(v.pos, A.Name(v.pos, v.name, False, v.orig), v.init)


def _bare(v: A.VarDecl) -> A.VarDecl:
    return dataclasses.replace(v, init=None)


def _const(v: A.VarDecl) -> A.ConstDecl:
    assert v.init is not None
    return A.ConstDecl(v.pos, v.annotations, v.name, v.type, v.init)


class MoveDeclarations:
    """Pass: Program → Program with declarations hoisted out of blocks."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        out: list[A.Node] = []
        for d in prog.decls:
            match d:
                case A.ControlDecl():
                    out.append(self._control(d))
                case A.ParserDecl():
                    out.append(self._parser(d))
                case A.ActionDecl():
                    out.append(self._standalone(d))
                case A.FunctionDecl(body=A.Block()):
                    out.append(self._standalone(d))
                case _:
                    out.append(d)
        return A.Program(prog.pos, tuple(out))

    # ------------------------------------------------------------ statements
    def _stmts(self, stmts: tuple[A.Stmt, ...], moved: list[A.Node],
               as_const: bool = True) -> tuple[A.Stmt, ...]:
        out: list[A.Stmt] = []
        for s in stmts:
            r = self._stmt(s, moved, as_const)
            if r is not None:
                out.append(r)
        return tuple(out)

    def _stmt(self, s: A.Stmt, moved: list[A.Node], as_const: bool) -> A.Stmt | None:
        match s:
            case A.VarDecl(init=init, is_const=True) if init is not None:
                moved.append(_const(s) if as_const else s)
                return None
            case A.VarDecl(init=None):
                moved.append(s)
                return None
            case A.VarDecl():
                moved.append(_bare(s))
                return _assign(s)
            case A.Block(stmts=ss):
                return dataclasses.replace(s, stmts=self._stmts(ss, moved, as_const))
            case A.If(then=t, other=o):
                then = self._stmt(t, moved, as_const) or A.EmptyStmt(t.pos)
                other = (self._stmt(o, moved, as_const) or A.EmptyStmt(o.pos)) \
                    if o is not None else None
                return dataclasses.replace(s, then=then, other=other)
            case A.Switch(cases=cs):
                cases = tuple(dataclasses.replace(
                    c, body=dataclasses.replace(c.body, stmts=self._stmts(c.body.stmts, moved,
                                                                          as_const))
                    if c.body is not None else None) for c in cs)
                return dataclasses.replace(s, cases=cases)
            case A.For(init=i, update=u, body=b):
                body = self._stmt(b, moved, as_const) or A.EmptyStmt(b.pos)
                return dataclasses.replace(s, init=self._stmts(i, moved, as_const),
                                           update=self._stmts(u, moved, as_const), body=body)
        return s

    # ------------------------------------------------------------ blocks
    @staticmethod
    def _own_locals(locals_: tuple[A.Node, ...]) -> tuple[list[A.Node], list[A.Stmt]]:
        """A block's own locals without initializers, and the initializers as assignments."""
        kept: list[A.Node] = []
        inits: list[A.Stmt] = []
        for x in locals_:
            if isinstance(x, A.VarDecl) and x.init is not None:
                if x.is_const:
                    kept.append(_const(x))
                    continue
                kept.append(_bare(x))
                inits.append(_assign(x))
            else:
                kept.append(x)
        return kept, inits

    def _control(self, c: A.ControlDecl) -> A.ControlDecl:
        moved: list[A.Node] = []
        own: list[A.Node] = []
        for x in c.locals:
            if isinstance(x, A.ActionDecl):
                body = dataclasses.replace(x.body, stmts=self._stmts(x.body.stmts, moved))
                own.append(dataclasses.replace(x, body=body))
            else:
                own.append(x)
        kept, inits = self._own_locals(tuple(own))
        apply_stmts = self._stmts(c.apply.stmts, moved)
        apply = dataclasses.replace(c.apply, stmts=tuple(inits) + apply_stmts)
        return dataclasses.replace(c, locals=tuple(moved) + tuple(kept), apply=apply)

    def _parser(self, p: A.ParserDecl) -> A.ParserDecl:
        moved: list[A.Node] = []
        states = [dataclasses.replace(st, stmts=self._stmts(st.stmts, moved))
                  for st in p.states]
        kept, inits = self._own_locals(p.locals)
        if inits:
            states = self._run_at_start(states, tuple(inits))
        return dataclasses.replace(p, locals=tuple(moved) + tuple(kept), states=tuple(states))

    @staticmethod
    def _run_at_start(states: list[A.ParserState],
                      inits: tuple[A.Stmt, ...]) -> list[A.ParserState]:
        """Parser-level initializers run once, when the parser starts."""
        start = next((st for st in states if st.name == "start"), None)
        if start is None:
            return states  # reported by the lowering ("has no 'start' state")

        def targets(st: A.ParserState) -> list[str]:
            t = st.transition
            if isinstance(t, str):
                return [t]
            if isinstance(t, A.Select):
                return [c.state for c in t.cases]
            return []

        if not any("start" in targets(st) for st in states):
            return [dataclasses.replace(st, stmts=inits + st.stmts) if st is start else st
                    for st in states]
        # Some state loops back to start: the initializers get a state of their own that
        # runs only once, and the old start state is renamed (p4c MoveInitializers).
        names = {st.name for st in states}
        i = 0
        while f"start_{i}" in names:
            i += 1
        old = f"start_{i}"

        def retarget(st: A.ParserState) -> A.ParserState:
            t = st.transition
            if t == "start":
                return dataclasses.replace(st, transition=old)
            if isinstance(t, A.Select):
                cases = tuple(dataclasses.replace(c, state=old) if c.state == "start" else c
                              for c in t.cases)
                return dataclasses.replace(st, transition=dataclasses.replace(t, cases=cases))
            return st

        renamed = [retarget(dataclasses.replace(st, name=old) if st is start else st)
                   for st in states]
        entry = A.ParserState(start.pos, (), "start", inits, old, start.transition_pos)
        return [entry] + renamed

    def _standalone(self, d: A.ActionDecl | A.FunctionDecl) -> A.Node:
        """An action or function outside any control keeps its variables, at its top."""
        assert d.body is not None
        moved: list[A.Node] = []
        stmts = self._stmts(d.body.stmts, moved, as_const=False)
        decls = tuple(x for x in moved if isinstance(x, A.VarDecl))
        return dataclasses.replace(d, body=dataclasses.replace(d.body, stmts=decls + stmts))
