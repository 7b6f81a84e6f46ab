"""SpecializeGenerics: generic headers, header unions and structs (`header h_t<T> { T f; }`)
are specialized per use, as p4c's front end does: `h_t<bit<8>>` becomes a declaration
`h_t_bit8` with `T` replaced, declared where the generic one was (nested uses, such as
`struct s<T> { h_t<T> h; }`, are specialized first), and the generic declaration goes.
"""
from __future__ import annotations

import dataclasses

from . import ast as A
from .diagnostics import Diagnostics
from .visit import rebuild

__all__ = ["SpecializeGenerics"]

_Generic = A.HeaderDecl | A.StructDecl | A.HeaderUnionDecl


class SpecializeGenerics:
    """Pass: Program → Program without generic struct-like declarations."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        self.diags = diags
        self.generic: dict[str, _Generic] = {
            d.name: d for d in prog.decls
            if isinstance(d, (A.HeaderDecl, A.StructDecl, A.HeaderUnionDecl)) and d.type_params}
        if not self.generic:
            return prog
        self.made: dict[str, list[A.Node]] = {n: [] for n in self.generic}
        self.names: set[str] = set()
        rest = [d if getattr(d, "name", None) in self.generic else self._rewrite(d)
                for d in prog.decls]
        out: list[A.Node] = []
        for d in rest:
            if isinstance(d, A.Decl) and d.name in self.generic:
                out += self.made[d.name]
            else:
                out.append(d)
        return A.Program(prog.pos, tuple(out))

    def _rewrite(self, n: A.Node) -> A.Node:
        def visit(x: A.Node) -> A.Node | None:
            if isinstance(x, A.TypeName) and x.name in self.generic and x.args:
                return A.TypeName(x.pos, self._specialize(x), ())
            return x if isinstance(x, A.Annotation) else None
        out = rebuild(n, visit)
        assert isinstance(out, A.Node)
        return out

    def _specialize(self, t: A.TypeName) -> str:
        g = self.generic[t.name]
        args = tuple(self._rewrite(a) for a in t.args)
        name = f"{t.name}_{'_'.join(_mangle(a) for a in args)}"
        if name in self.names:
            return name
        self.names.add(name)
        if len(args) != len(g.type_params):
            self.diags.error(t.pos, f"'{t.name}' takes {len(g.type_params)} type argument(s), "
                                    f"got {len(args)}")
        bind = dict(zip(g.type_params, args))

        def subst(x: A.Node) -> A.Node | None:
            if isinstance(x, A.TypeName) and x.name in bind and not x.args:
                return bind[x.name]
            return None
        fields: list[A.Field] = []
        for f in g.fields:
            ft = self._rewrite(rebuild(f.type, subst))
            assert isinstance(ft, A.TypeExpr)
            fields.append(dataclasses.replace(f, type=ft))
        self.made[g.name].append(dataclasses.replace(g, name=name, fields=tuple(fields),
                                                     type_params=()))
        return name


def _mangle(t: A.Node) -> str:
    """p4c's spelling of a type argument in a specialized name: bit<8> -> bit8."""
    match t:
        case A.BitType(width=A.IntLit(value=w)):
            return f"bit{w}"
        case A.IntType(width=A.IntLit(value=w)):
            return f"int{w}"
        case A.BoolType():
            return "bool"
        case A.TypeName(name=n):
            return n
    return "T"
