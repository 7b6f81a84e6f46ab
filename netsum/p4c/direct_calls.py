"""InstantiateDirectCalls: ``Sub.apply(args);`` (a control or parser applied by its type name)
becomes an instance declared in the enclosing block plus an ordinary instance apply, as p4c
does.

Each direct call gets its own instance, named ``<Type>_inst`` (made unique) and annotated
``@name("<Type>")`` so its tables are named ``<Outer>.<Type>.<table>`` in P4Info, like p4c's.
"""
from __future__ import annotations

import dataclasses

from . import ast as A
from .diagnostics import Diagnostics
from .unique_names import NameSource
from .visit import identifiers, rebuild

__all__ = ["InstantiateDirectCalls"]


class InstantiateDirectCalls:
    """Pass: Program → Program."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        self.controls = {d.name for d in prog.decls
                         if isinstance(d, (A.ControlDecl, A.ParserDecl))}
        self.fresh: NameSource | None = None
        self.prog = prog
        return A.Program(prog.pos, tuple(
            self._control(d) if isinstance(d, A.ControlDecl) else
            self._parser(d) if isinstance(d, A.ParserDecl) else d for d in prog.decls))

    def _parser(self, p: A.ParserDecl) -> A.ParserDecl:
        local = {x.name for x in p.locals if isinstance(x, A.Decl)}
        self.local = local | {q.name for q in p.params}
        self.new: list[A.Instantiation] = []
        states = rebuild(p.states, self._visit)
        if not self.new:
            return p
        return dataclasses.replace(p, locals=p.locals + tuple(self.new), states=states)

    def _control(self, c: A.ControlDecl) -> A.ControlDecl:
        local = {x.name for x in c.locals if isinstance(x, A.Decl)}
        self.local = local | {p.name for p in c.params}
        self.new = []
        apply = rebuild(c.apply, self._visit)
        if not self.new:
            return c
        return dataclasses.replace(c, locals=c.locals + tuple(self.new), apply=apply)

    def _visit(self, s: A.Node) -> A.Node | None:
        match s:
            case A.CallStmt(call=A.Call(func=A.Member(expr=A.Name(name=n, top_level=False),
                                                      member="apply") as m) as call) \
                    if n in self.controls and n not in self.local:
                if self.fresh is None:
                    self.fresh = NameSource(identifiers(self.prog))
                inst = self.fresh.new(f"{n}_inst")
                annos = (A.Annotation(s.pos, "name", (A.StrLit(s.pos, n),), f'"{n}"'),)
                self.new.append(A.Instantiation(s.pos, annos, inst, A.TypeName(m.pos, n), ()))
                func = A.Member(m.pos, A.Name(m.expr.pos, inst), "apply")
                return dataclasses.replace(s, call=dataclasses.replace(call, func=func))
            case A.Expr() | A.Annotation():
                return s  # no statement inside
        return None
