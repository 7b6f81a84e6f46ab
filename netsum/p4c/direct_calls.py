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
from .unique_names import NameSource, identifiers

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
        states = tuple(dataclasses.replace(st, stmts=tuple(self._stmt(s) for s in st.stmts))
                       for st in p.states)
        if not self.new:
            return p
        return dataclasses.replace(p, locals=p.locals + tuple(self.new), states=states)

    def _control(self, c: A.ControlDecl) -> A.ControlDecl:
        local = {x.name for x in c.locals if isinstance(x, A.Decl)}
        self.local = local | {p.name for p in c.params}
        self.new = []
        apply = self._block(c.apply)
        if not self.new:
            return c
        return dataclasses.replace(c, locals=c.locals + tuple(self.new), apply=apply)

    def _block(self, b: A.Block) -> A.Block:
        stmts = tuple(self._stmt(s) for s in b.stmts)
        return b if all(x is y for x, y in zip(stmts, b.stmts)) else \
            dataclasses.replace(b, stmts=stmts)

    def _stmt(self, s: A.Stmt) -> A.Stmt:
        match s:
            case A.Block():
                return self._block(s)
            case A.If(then=t, other=o):
                return dataclasses.replace(s, then=self._stmt(t),
                                           other=self._stmt(o) if o is not None else None)
            case A.Switch(cases=cs):
                return dataclasses.replace(s, cases=tuple(
                    dataclasses.replace(c, body=self._block(c.body)) if c.body is not None
                    else c for c in cs))
            case A.For(body=b):
                return dataclasses.replace(s, body=self._stmt(b))
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
        return s
