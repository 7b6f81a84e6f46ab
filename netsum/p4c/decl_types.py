"""Types and constants read off the declarations, for the AST rewrites that run before names
are resolved (InlineFunctions, ExpandStackIndex).

They need only what a declaration states: the declared type of a variable, parameter or
field, a stack's size, the value of a constant written as a literal (or simple arithmetic on
such constants).  Anything it takes real type checking to know is None; the callers then
leave the construct for the type checker, which reports it.
"""
from __future__ import annotations

from . import ast as A

__all__ = ["DeclaredTypes"]


class DeclaredTypes:
    def __init__(self, prog: A.Program) -> None:
        self.decls: dict[str, A.Decl] = {d.name: d for d in prog.decls if isinstance(d, A.Decl)}
        self.consts: dict[str, int] = {}
        for d in prog.decls:
            if isinstance(d, A.ConstDecl):
                v = self.const_int(d.value)
                if v is not None:
                    self.consts[d.name] = v
        # Declared types of the names in scope (set per parser/control/action by the caller).
        self.scope: dict[str, A.TypeExpr] = {}

    def enter(self, params: tuple[A.Param, ...], locals_: tuple[A.Node, ...]) -> None:
        self.scope = {p.name: p.type for p in params}
        for x in locals_:
            if isinstance(x, A.VarDecl):
                self.scope[x.name] = x.type
            elif isinstance(x, A.ConstDecl):
                self.scope[x.name] = x.type
                v = self.const_int(x.value)
                if v is not None:
                    self.consts[x.name] = v

    def const_int(self, e: A.Expr | None) -> int | None:
        match e:
            case A.IntLit(value=v):
                return v
            case A.Name(name=n):
                return self.consts.get(n)
            case A.Cast(expr=x):
                return self.const_int(x)
            case A.Binary(op=op, left=l, right=r) if op in ("+", "-", "*", "<<", ">>"):
                a, b = self.const_int(l), self.const_int(r)
                if a is None or b is None:
                    return None
                return {"+": a + b, "-": a - b, "*": a * b, "<<": a << b, ">>": a >> b}[op]
        return None

    def resolve(self, t: A.TypeExpr | None) -> A.TypeExpr | None:
        """Follow typedefs."""
        for _ in range(16):
            d = self.decls.get(t.name) if isinstance(t, A.TypeName) else None
            if not isinstance(d, A.Typedef):
                return t
            t = d.type
        return t

    def stack_size(self, t: A.TypeExpr | None) -> int | None:
        t = self.resolve(t)
        return self.const_int(t.size) if isinstance(t, A.StackType) else None

    def type_of(self, e: A.Expr) -> A.TypeExpr | None:
        """The declared type of a location or simple expression (None when unknown)."""
        match e:
            case A.Name(name=n):
                return self.scope.get(n)
            case A.Member(expr=x, member=m):
                t = self.resolve(self.type_of(x))
                d = self.decls.get(t.name) if isinstance(t, A.TypeName) else None
                if isinstance(d, (A.HeaderDecl, A.StructDecl, A.HeaderUnionDecl)):
                    return next((f.type for f in d.fields if f.name == m), None)
                return None
            case A.Index(expr=x):
                t = self.resolve(self.type_of(x))
                return t.elem if isinstance(t, A.StackType) else None
            case A.Slice(hi=h, lo=lo):
                hv, lv = self.const_int(h), self.const_int(lo)
                if hv is None or lv is None:
                    return None
                w = hv - lv + 1
                return A.BitType(e.pos, A.IntLit(e.pos, w, None, False, str(w)))
            case A.Cast(type=t):
                return t
            case A.IntLit(width=w, signed=sg) if w is not None:
                lit = A.IntLit(e.pos, w, None, False, str(w))
                return A.IntType(e.pos, lit) if sg else A.BitType(e.pos, lit)
            case A.Unary(operand=x) | A.Binary(left=x, op="+" | "-" | "*" | "&" | "|" | "^"):
                return self.type_of(x)
            case A.Call(func=A.Name(name=n)) if isinstance(self.decls.get(n), A.FunctionDecl):
                f = self.decls[n]
                assert isinstance(f, A.FunctionDecl)
                return None if f.type_params or isinstance(f.ret, A.VoidType) else f.ret
        return None
