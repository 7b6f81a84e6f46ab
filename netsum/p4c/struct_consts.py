"""InlineStructConstants: a file-scope constant of a struct type written as a list or
structure expression (`const PortId_t CPU = {9w192};`) is replaced by that expression where
it is used, and its declaration dropped: constant folding (resolve.const_eval) handles
scalars only, while the typer gives a list the struct type its use expects (an assignment's
left side, the other side of `==`; p4c's midend folds the same comparisons member by member,
as in issue1210: `meta.foo == PSA_CPU_PORT` is `meta.foo._v == 9w192`).

Runs after UniqueNames, so a name equal to such a constant's names the constant.
"""
from __future__ import annotations

from . import ast as A
from .diagnostics import Diagnostics
from .visit import rebuild

__all__ = ["InlineStructConstants"]


class InlineStructConstants:
    """Pass: Program → Program without struct-typed constants."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        structs = {d.name for d in prog.decls if isinstance(d, A.StructDecl)}
        values: dict[str, A.ListExpr] = {
            d.name: d.value for d in prog.decls
            if isinstance(d, A.ConstDecl) and isinstance(d.type, A.TypeName) and
            d.type.name in structs and isinstance(d.value, A.ListExpr)}
        if not values:
            return prog

        def visit(n: A.Node) -> A.Node | None:
            if isinstance(n, A.Name) and n.name in values:
                return values[n.name]
            return n if isinstance(n, A.Annotation) else None

        decls = tuple(rebuild(d, visit) for d in prog.decls
                      if not (isinstance(d, A.ConstDecl) and d.name in values))
        return A.Program(prog.pos, decls)
