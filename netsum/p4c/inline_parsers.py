"""InlineParsers: a sub-parser applied in a parser state becomes states of the caller.

    state s { a; sub.apply(pkt, hdr.x); b; transition t; }

becomes ``s`` = ``a`` then a transition to the sub-parser's start (its states copied under
fresh names, parameters replaced by the arguments, its variables the caller's), the
sub-parser's ``accept`` goes to a new state holding ``b`` and ``transition t``, and its
``reject`` rejects the whole parser (P4_16 §13.8).  An ``out`` argument's headers are made
invalid when the sub-parser starts (§6.8).  Sub-parsers applied inside sub-parsers are
inlined first; every application gets its own copy of the states.

Runs after MoveDeclarations (the sub-parser's variables already have unique names and
their initializers run in its start state) and before InlineFunctions.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from . import ast as A
from .decl_types import DeclaredTypes
from .diagnostics import Diagnostics, Pos
from .unique_names import NameSource
from .visit import identifiers, rebuild

__all__ = ["InlineParsers"]


class InlineParsers:
    """Pass: Program → Program without sub-parser applications."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        self.diags = diags
        self.parsers = {d.name: d for d in prog.decls if isinstance(d, A.ParserDecl)}
        if not any(self._instances(p) for p in self.parsers.values()):
            return prog
        self.fresh = NameSource(identifiers(prog))
        self.types = DeclaredTypes(prog)
        self.done: dict[str, A.ParserDecl] = {}
        out = [self._inline(d, 0) if isinstance(d, A.ParserDecl) else d for d in prog.decls]
        return A.Program(prog.pos, tuple(out))

    def _instances(self, p: A.ParserDecl) -> dict[str, A.ParserDecl]:
        return {x.name: self.parsers[x.type.name] for x in p.locals
                if isinstance(x, A.Instantiation) and isinstance(x.type, A.TypeName)
                and x.type.name in self.parsers}

    def _inline(self, p: A.ParserDecl, depth: int) -> A.ParserDecl:
        if p.name in self.done:
            return self.done[p.name]
        subs = self._instances(p)
        if not subs or depth > 16:
            return p
        flat = {name: self._inline(decl, depth + 1) for name, decl in subs.items()}
        self.locals: list[A.Node] = [x for x in p.locals if not (
            isinstance(x, A.Instantiation) and x.name in subs)]
        locals_before = self.locals
        states: list[A.ParserState] = []
        work = list(p.states)
        while work:
            st = work.pop(0)
            split = self._split(st, flat, p)
            if split is None:
                states.append(st)
                continue
            head, copied, rest = split
            states.append(head)
            states.extend(copied)
            work.insert(0, rest)
        out = dataclasses.replace(p, locals=tuple(locals_before), states=tuple(states))
        self.done[p.name] = out
        return out

    def _split(self, st: A.ParserState, subs: dict[str, A.ParserDecl], caller: A.ParserDecl
               ) -> tuple[A.ParserState, list[A.ParserState], A.ParserState] | None:
        for i, s in enumerate(st.stmts):
            call = s.call if isinstance(s, A.CallStmt) else None
            f = call.func if call is not None else None
            if not (isinstance(f, A.Member) and f.member == "apply" and
                    isinstance(f.expr, A.Name) and f.expr.name in subs):
                continue
            assert call is not None
            sub = subs[f.expr.name]
            cont = self.fresh.new(f"{st.name}_{f.expr.name}")
            entry, copied, start_stmts = self._copy(sub, f.expr.name, call, cont, s.pos)
            if entry is None:
                return None
            head = dataclasses.replace(st, stmts=st.stmts[:i] + tuple(start_stmts),
                                       transition=entry)
            rest = A.ParserState(s.pos, (), cont, st.stmts[i + 1:], st.transition,
                                 st.transition_pos)
            return head, copied, rest
        return None

    def _copy(self, sub: A.ParserDecl, inst: str, call: A.Call, cont: str,
              pos: Pos) -> tuple[str | None, list[A.ParserState], list[A.Stmt]]:
        """The sub-parser's states for one application, and what runs before its start."""
        missing = sub.params[len(call.args):]
        if missing and all(p.default is not None for p in missing):
            # Parameters left out take their default values (`in bit<8> y = 5`).
            call = dataclasses.replace(call, args=call.args + tuple(
                A.Arg(pos, None, p.default) for p in missing))
        if len(call.args) != len(sub.params) or any(a.value is None or a.name for a in
                                                      call.args):
            self.diags.error(pos, f"unsupported construct: sub-parser '{inst}' applied with "
                                  f"{len(call.args)} argument(s) for {len(sub.params)} "
                                  "parameter(s), or with named or don't-care arguments")
            return None, [], []
        binding: dict[str, A.Expr] = {}
        before: list[A.Stmt] = []
        for prm, arg in zip(sub.params, call.args):
            assert arg.value is not None
            binding[prm.name] = arg.value
            if prm.direction == "out":
                before += self._invalidate(prm.type, arg.value, pos)
        names = {st.name: self.fresh.new(f"{inst}_{st.name}") for st in sub.states}
        names["accept"] = cont
        for x in sub.locals:
            if isinstance(x, A.Instantiation) and isinstance(x.type, A.TypeName) and \
                    x.type.name == "value_set":
                # One value set per application, named in P4Info under the instance
                # (`Caller.inst.vs`, as p4c's inliner names it).
                new = self.fresh.new(f"{inst}_{x.name}")
                has_name = any(an.name == "name" for an in x.annotations)
                annos = x.annotations if has_name else x.annotations + (A.Annotation(
                    x.pos, "name", (A.StrLit(x.pos, f"{inst}.{x.name}"),),
                    f'"{inst}.{x.name}"'),)
                self.locals.append(dataclasses.replace(x, name=new, annotations=annos))
                binding[x.name] = A.Name(x.pos, new)
                continue
            if isinstance(x, A.Instantiation):
                self.diags.error(x.pos, f"unsupported construct: instance '{x.name}' inside "
                                        f"sub-parser '{sub.name}'")
                return None, [], []
            self.locals.append(x)  # unique names already (UniqueNames), no initializers

        def target(t: str) -> str:
            return names.get(t, t)

        copied: list[A.ParserState] = []
        for st in sub.states:
            tr = st.transition
            if isinstance(tr, str):
                tr = target(tr)
            elif isinstance(tr, A.Select):
                tr = dataclasses.replace(tr, cases=tuple(
                    dataclasses.replace(c, state=target(c.state)) for c in tr.cases))
            stmts = _substitute(st.stmts, binding)
            if isinstance(tr, A.Select):
                tr = _substitute_node(tr, binding)
            copied.append(dataclasses.replace(st, name=names[st.name], stmts=stmts,
                                              transition=tr))
        return names.get("start"), copied, before

    def _invalidate(self, t: A.TypeExpr, var: A.Expr, pos: Pos) -> list[A.Stmt]:
        t2 = self.types.resolve(t)
        d = self.types.decls.get(t2.name) if isinstance(t2, A.TypeName) else None
        if isinstance(d, A.HeaderDecl):
            return [A.CallStmt(pos, A.Call(pos, A.Member(pos, var, "setInvalid"), (), ()))]
        if isinstance(d, A.StructDecl):
            out: list[A.Stmt] = []
            for fld in d.fields:
                out += self._invalidate(fld.type, A.Member(pos, var, fld.name), pos)
            return out
        return []


def _substitute_node(n: Any, binding: dict[str, A.Expr]) -> Any:
    def visit(x: A.Node) -> A.Node | None:
        if isinstance(x, A.Annotation):
            return x
        if isinstance(x, A.Name) and not x.top_level and x.name in binding:
            return binding[x.name]
        return None
    return rebuild(n, visit)


def _substitute(stmts: tuple[A.Stmt, ...], binding: dict[str, A.Expr]) -> tuple[A.Stmt, ...]:
    return tuple(_substitute_node(s, binding) for s in stmts)
