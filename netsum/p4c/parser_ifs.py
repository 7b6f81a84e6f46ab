"""SplitParserIfs: an ``if`` in a parser state becomes a select on its condition.

BMv2 parse states are a list of operations and then one transition, so a state whose body
branches is cut where the ``if`` stands, as p4c's back end does:

    state s { A; if (c) { B } else { C } D; transition T; }
    =>
    state s       { A; transition select(c) { true: s_true; default: s_false; } }
    state s_true  { B; transition s_join; }
    state s_false { C; transition s_join; }      (no else: s goes to s_join directly)
    state s_join  { D; transition T; }

The condition is evaluated where the ``if`` was (after A, before B/C), so the meaning is the
same.  Nested ifs and ifs in the new states are split the same way.  Runs after
MoveDeclarations (the states hold no declarations, so moving statements between states does
not change any name's scope) and before sub-parsers are inlined.
"""
from __future__ import annotations

import dataclasses

from . import ast as A
from .diagnostics import Diagnostics, Pos
from .unique_names import NameSource
from .visit import flat, identifiers

__all__ = ["SplitParserIfs"]


def _has_if(stmts: tuple[A.Stmt, ...]) -> bool:
    return any(isinstance(s, A.If) for s in flat(stmts))


class SplitParserIfs:
    def __init__(self) -> None:
        self.fresh: NameSource | None = None

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        if not any(isinstance(d, A.ParserDecl) and any(_has_if(st.stmts) for st in d.states)
                   for d in prog.decls):
            return prog
        self.fresh = NameSource(identifiers(prog))
        decls = tuple(self._parser(d) if isinstance(d, A.ParserDecl) else d
                      for d in prog.decls)
        return dataclasses.replace(prog, decls=decls)

    def _parser(self, p: A.ParserDecl) -> A.ParserDecl:
        if not any(_has_if(st.stmts) for st in p.states):
            return p
        states: list[A.ParserState] = []
        for st in p.states:
            states += self._split(st, st.name, flat(st.stmts), st.transition,
                                  st.transition_pos)
        return dataclasses.replace(p, states=tuple(states))

    def _split(self, orig: A.ParserState, name: str, stmts: list[A.Stmt],
               transition: A.Select | str | None, tpos: Pos) -> list[A.ParserState]:
        assert self.fresh is not None
        for k, s in enumerate(stmts):
            if not isinstance(s, A.If):
                continue
            t_name = self.fresh.new(f"{name}_true")
            f_name = self.fresh.new(f"{name}_false") if s.other is not None else ""
            join = self.fresh.new(f"{name}_join")
            select = A.Select(s.pos, (s.cond,), (
                A.SelectCase(s.pos, A.BoolLit(s.pos, True), t_name, s.pos),
                A.SelectCase(s.pos, A.Default(s.pos), f_name or join, s.pos)))
            out = [dataclasses.replace(orig, name=name, stmts=tuple(stmts[:k]),
                                       transition=select, transition_pos=s.pos)]
            branch = dataclasses.replace(orig, annotations=())
            out += self._split(branch, t_name, flat((s.then,)), join, s.pos)
            if s.other is not None:
                out += self._split(branch, f_name, flat((s.other,)), join, s.pos)
            out += self._split(branch, join, stmts[k + 1:], transition, tpos)
            return out
        return [dataclasses.replace(orig, name=name, stmts=tuple(stmts), transition=transition,
                                    transition_pos=tpos)]
