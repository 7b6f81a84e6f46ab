"""HoistLookahead: a lookahead inside a larger parser expression is read into a variable
first, in a statement of its own right before the one that uses it.

BMv2 reads packet bits ahead only as the source of a `set` or as a select key, so
``pkt.extract(h, (bit<32>)(pkt.lookahead<ihl_t>().ihl) * 32 - 160)`` becomes

    tmp = pkt.lookahead<ihl_t>().ihl;   // a `set` from packet bits
    pkt.extract(h, (bit<32>)tmp * 32 - 160);

Nothing is extracted between the two, so the bits read are the same.  The variable takes the
type of what is read (the header's field, a slice of it, or the type argument), read off the
declarations.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from . import ast as A
from .decl_types import DeclaredTypes
from .diagnostics import Diagnostics
from .unique_names import NameSource
from .visit import identifiers, rebuild

__all__ = ["HoistLookahead"]


def _is_lookahead(e: Any) -> bool:
    return isinstance(e, A.Call) and isinstance(e.func, A.Member) and \
        e.func.member == "lookahead" and len(e.type_args) == 1


def _lookahead_path(e: Any) -> bool:
    """pkt.lookahead<T>(), or a field or slice of it, or a cast of one to its own type (p4c
    drops such casts)."""
    if isinstance(e, A.Cast) and isinstance(e.expr, A.Call) and _is_lookahead(e.expr) and \
            _same_type(e.type, e.expr.type_args[0]):
        return True
    while isinstance(e, (A.Member, A.Slice)):
        e = e.expr
    return _is_lookahead(e)


def _same_type(a: A.TypeExpr, b: A.TypeExpr) -> bool:
    if isinstance(a, A.BitType) and isinstance(b, A.BitType) or \
            isinstance(a, A.IntType) and isinstance(b, A.IntType):
        wa, wb = a.width, b.width
        return isinstance(wa, A.IntLit) and isinstance(wb, A.IntLit) and wa.value == wb.value
    return isinstance(a, A.TypeName) and isinstance(b, A.TypeName) and a.name == b.name


class HoistLookahead:
    """Pass: Program → Program; parsers only."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        self.types = DeclaredTypes(prog)
        self.fresh: NameSource | None = None
        self.prog = prog
        out = [self._parser(d) if isinstance(d, A.ParserDecl) else d for d in prog.decls]
        return A.Program(prog.pos, tuple(out))

    def _parser(self, p: A.ParserDecl) -> A.ParserDecl:
        self.decls: list[A.VarDecl] = []
        states = []
        for st in p.states:
            stmts: list[A.Stmt] = []
            for s in st.stmts:
                pre: list[A.Stmt] = []
                whole = (isinstance(s, A.Assign) and _lookahead_path(s.rhs)) or \
                    (isinstance(s, A.CallStmt) and _is_lookahead(s.call))
                if not whole:
                    s = self._hoist(s, pre)
                stmts += pre + [s]
            t = st.transition
            if isinstance(t, A.Select):
                keys = []
                for k in t.keys:
                    pre = []
                    keys.append(k if _lookahead_path(k) else self._hoist(k, pre))
                    stmts += pre
                t = dataclasses.replace(t, keys=tuple(keys))
            states.append(dataclasses.replace(st, stmts=tuple(stmts), transition=t))
        if not self.decls:
            return p
        return dataclasses.replace(p, locals=tuple(self.decls) + p.locals, states=tuple(states))

    def _hoist(self, root: Any, pre: list[A.Stmt]) -> Any:
        """root with every lookahead path inside it (root itself excepted) read into a new
        variable first, by an assignment appended to pre."""
        def visit(n: A.Node) -> A.Node | None:
            if isinstance(n, A.Annotation):
                return n
            if n is root or not (isinstance(n, A.Expr) and _lookahead_path(n)):
                return None
            t = self._type(n)
            if t is None:
                return n  # left to the type checker, which reports it
            if self.fresh is None:
                self.fresh = NameSource(identifiers(self.prog))
            name = self.fresh.new("tmp")
            self.decls.append(A.VarDecl(n.pos, (), t, name, None))
            var = A.Name(n.pos, name)
            pre.append(A.Assign(n.pos, var, n))
            return var

        return rebuild(root, visit)

    def _type(self, e: A.Expr) -> A.TypeExpr | None:
        if _is_lookahead(e):
            assert isinstance(e, A.Call)
            return e.type_args[0]
        if isinstance(e, A.Member):
            base = self.types.resolve(self._type(e.expr))
            d = self.types.decls.get(base.name) if isinstance(base, A.TypeName) else None
            if isinstance(d, A.HeaderDecl):
                return next((f.type for f in d.fields if f.name == e.member), None)
            return None
        if isinstance(e, A.Slice):
            hi, lo = self.types.const_int(e.hi), self.types.const_int(e.lo)
            if hi is None or lo is None:
                return None
            w = hi - lo + 1
            return A.BitType(e.pos, A.IntLit(e.pos, w, None, False, str(w)))
        return None
