"""Control-flow code generation: conditionals, with cheap successors inlined.

A conditional node becomes `def N(pkt)`.  Instead of returning the next node for the pipeline
loop to call, its body continues inline into successors that cost nothing to duplicate: other
conditionals, hidden keyless tables whose default action is const (p4c's `tbl_*` wrappers of
statements in `apply`; their action, parameters and next node are fixed at load time), and
exact-match or keyless tables without direct resources whose next node is the same whatever
action runs (a plain `t.apply();` statement): their lookup is emitted inline, reading the
table's live entry dict and default record, so control-plane changes are seen at once.  A depth
budget bounds the duplication of shared successors; past it the body returns the next node as
usual, so behaviour is exactly `while node: node = node(pkt)`.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FixedTable", "InlineTable", "conditional_source", "INLINE_DEPTH"]

INLINE_DEPTH = 4


@dataclass(frozen=True, slots=True)
class FixedTable:
    """A table whose application is one fixed action call followed by a fixed next node."""
    action_fn: str                  # global name of the compiled action function
    params: tuple[int, ...]
    next: str | None                # JSON name of the next node


@dataclass(frozen=True, slots=True)
class InlineTable:
    """A table whose application is a lookup (or the default) followed by a fixed next node."""
    table: str                      # global name of the Table (its `_default_rec`)
    entries: str | None             # global name of its exact-match dict; None = keyless
    key: str                        # source of the dict key over F ('' when keyless)
    next: str | None                # JSON name of the next node


def conditional_source(name: str, nodes: dict[str, str], conds: dict[str, str],
                       branches: dict[str, tuple[str | None, str | None]],
                       fixed: dict[str, FixedTable], depth: int = INLINE_DEPTH,
                       tables: dict[str, InlineTable] | None = None) -> str:
    """Source of the node function of conditional `name`.

    nodes: JSON node name -> global function name; conds: conditional -> Python condition over
    F; branches: conditional -> (true_next, false_next)."""

    def go(target: str | None, budget: int) -> list[str]:
        if target is None:
            return ["return None"]
        if budget > 0 and target in conds:
            t, f = branches[target]
            return ([f"if {conds[target]}:"] + ["    " + s for s in go(t, budget - 1)]
                    + ["else:"] + ["    " + s for s in go(f, budget - 1)])
        if budget > 0 and target in fixed:
            ft = fixed[target]
            return ([f"{ft.action_fn}(F, {ft.params!r}, pkt)", "if pkt.exited:",
                     "    return None"] + go(ft.next, budget - 1))
        if budget > 0 and tables and target in tables:
            it = tables[target]
            if it.entries is None:
                look = [f"_r = {it.table}._default_rec"]
            else:
                look = [f"_r = {it.entries}.get({it.key})", "if _r is None:",
                        f"    _r = {it.table}._default_rec"]
            # Same steps as Table.make_node's plain node (netsum/switch/tables.py).
            return look + ["_r.fn(F, _r.params, pkt)", "if pkt.exited:", "    return None"] + \
                go(it.next, budget - 1)
        return [f"return {nodes[target]}"]

    t, f = branches[name]
    body = [f"if {conds[name]}:"] + ["    " + s for s in go(t, depth)] + ["else:"] + \
        ["    " + s for s in go(f, depth)]
    return f"def {nodes[name]}(pkt):\n    F = pkt.F\n" + "".join(f"    {s}\n" for s in body)
