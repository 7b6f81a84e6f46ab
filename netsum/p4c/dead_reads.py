"""RemoveDeadReads: a register read whose result nobody uses goes, and so may its register.

p4c's front end does this in two steps that change the control-plane API, so netsum-p4c
does the same to write the same P4Info (p4c's issue2735-bmv2):

* SimplifyDefUse deletes a call statement whose results are never used when the method is
  ``@noSideEffects``; in v1model that is ``register.read`` (p4c's v1model.p4 marks it so).
  Here: a ``r.read(v, i)`` in a control, ``r`` one of the control's register instances, ``v``
  a variable of the control read nowhere else (every mention of ``v`` is such a read's
  result) and ``i`` free of calls.  The variable, now unused, goes too.
* RemoveAllUnusedDeclarations then deletes an unused instance unless its declared type is an
  extern: an instance declared through a ``typedef`` name (``typedef register<T> R; R(8) r;``)
  is a typedef's instance to p4c and is deleted (dead reads or not), so it is absent from
  the JSON and P4Info.  An instance whose type is written ``register<T>`` stays, used or not.

Runs after UniqueNames and InlineFunctions: every variable name is unique in the program and
every statement that could mention it is inside the control.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, TypeGuard

from . import ast as A
from .diagnostics import Diagnostics
from .visit import nodes, rebuild

__all__ = ["RemoveDeadReads"]


def _names(node: Any) -> Counter[str]:
    """How often each name is mentioned (A.Name) under node."""
    return Counter(x.name for x in nodes(node, annotations=True) if isinstance(x, A.Name))


def _has_call(node: Any) -> bool:
    return any(isinstance(x, A.Call) for x in nodes(node, annotations=True))


class RemoveDeadReads:
    """Pass: Program → Program without dead register reads and the typedef-typed instances
    they leave unused."""

    def run(self, prog: A.Program, diags: Diagnostics) -> A.Program:
        typedefs = {d.name: d.type for d in prog.decls
                    if isinstance(d, A.Typedef) and not d.is_new_type}
        decls = tuple(self._control(d, typedefs) if isinstance(d, A.ControlDecl) else d
                      for d in prog.decls)
        if all(a is b for a, b in zip(decls, prog.decls)):
            return prog
        return A.Program(prog.pos, decls)

    def _control(self, c: A.ControlDecl, typedefs: dict[str, A.TypeExpr]) -> A.ControlDecl:
        def is_register(t: A.TypeExpr) -> bool:
            seen = 0
            while isinstance(t, A.TypeName) and t.name in typedefs and seen < 16:
                t, seen = typedefs[t.name], seen + 1
            return isinstance(t, A.TypeName) and t.name == "register"

        registers = {d.name for d in c.locals
                     if isinstance(d, A.Instantiation) and is_register(d.type)}
        variables = {x.name for x in nodes((c.locals, c.apply), annotations=True)
                     if isinstance(x, A.VarDecl)} if registers else set()

        def dead_read_target(n: A.Node) -> str | None:
            """The result variable of a `r.read(v, i)` statement that may go, else None."""
            if not isinstance(n, A.CallStmt):
                return None
            f, args = n.call.func, n.call.args
            if not (isinstance(f, A.Member) and f.member == "read"
                    and isinstance(f.expr, A.Name) and f.expr.name in registers
                    and len(args) == 2 and all(a.name is None for a in args)):
                return None
            out = args[0].value
            if not isinstance(out, A.Name) or out.name not in variables \
                    or _has_call(args[1].value):
                return None
            return out.name

        # Each step walks the whole control (large in unrolled programs): skipped when
        # nothing can come of it.
        reads = Counter(v for n in nodes((c.locals, c.apply), annotations=True)
                        if (v := dead_read_target(n)) is not None) if registers else Counter()
        mentions = _names((c.locals, c.apply)) if reads else Counter()
        dead = {v for v, k in reads.items() if mentions[v] == k}

        def drop(n: A.Node) -> A.Node | None:
            if dead_read_target(n) in dead or isinstance(n, A.VarDecl) and n.name in dead:
                return A.EmptyStmt(n.pos)
            return None

        body, local_parts = c.apply, c.locals
        if dead:
            body = rebuild(c.apply, drop)
            kept = tuple(d for d in c.locals
                         if not (isinstance(d, A.VarDecl) and d.name in dead))
            local_parts = rebuild(kept, drop)

        def typedef_instance(d: A.Node) -> TypeGuard[A.Instantiation]:
            return isinstance(d, A.Instantiation) and isinstance(d.type, A.TypeName) \
                and not d.type.args and d.type.name in typedefs

        if any(typedef_instance(d) for d in local_parts):
            mentions = _names((local_parts, body))
            local_parts = tuple(d for d in local_parts
                                if not (typedef_instance(d) and mentions[d.name] == 0))
        if body is c.apply and len(local_parts) == len(c.locals) \
                and all(a is b for a, b in zip(local_parts, c.locals)):
            return c
        return dataclasses.replace(c, locals=local_parts, apply=body)
