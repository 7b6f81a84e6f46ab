"""HoistStaticAsserts: `static_assert(check[, message])` (core.p4) is checked at compile time.

The call is a compile-time constant `true` when ``check`` is a constant `true` and an error
naming ``message`` otherwise (p4c's front end evaluates it the same way and emits nothing for
it).  Written as a statement (inside a function, an action, a control or a parser state) the
call becomes a hidden file-scope constant ``const bool static_assert_N = static_assert(...);``
so that ResolveNames checks it with every other constant; its statement becomes empty.  The
expression form, `const bool c = static_assert(...);`, is folded by resolve.const_eval.
"""
from __future__ import annotations

from . import ast as A
from .diagnostics import Diagnostics
from .unique_names import NameSource
from .visit import identifiers, rebuild

__all__ = ["HoistStaticAsserts", "NAME"]

NAME = "static_assert"


class HoistStaticAsserts:
    """Pass: Program → Program whose static_assert statements are file-scope constants."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        fresh: NameSource | None = None
        hoisted: list[A.Node] = []

        def visit(n: A.Node) -> A.Node | None:
            nonlocal fresh
            if isinstance(n, A.CallStmt) and isinstance(n.call.func, A.Name) \
                    and n.call.func.name == NAME:
                if fresh is None:
                    fresh = NameSource(identifiers(prog))
                hoisted.append(A.ConstDecl(n.pos, (), fresh.new(NAME), A.BoolType(n.pos),
                                           n.call))
                return A.EmptyStmt(n.pos)
            return None

        decls = rebuild(prog.decls, visit)
        if not hoisted:
            return prog
        return A.Program(prog.pos, tuple(decls) + tuple(hoisted))
