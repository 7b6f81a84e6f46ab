"""SynthesizeActions / MoveActionsToTables: statements directly in ``apply`` become hidden
actions in hidden keyless tables (p4c ``midend/actionSynthesis.cpp``).

Consecutive assignments and extern calls form one group; a table apply, an ``if``, a ``switch``
or a direct action call ends it.  Hidden actions are named ``<file><line>`` after the first
statement of the group and their tables ``tbl_<action>``; p4c emits the hidden actions in
post-order of the blocks holding them (inner blocks first), which :func:`group_order`
reproduces so action ids match.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from . import ast as A
from .visit import nodes

__all__ = ["is_simple", "group_order", "hidden_action_base", "direct_action_call",
           "loop_fits_an_action"]


def direct_action_call(s: A.Stmt, action_names: set[str]) -> bool:
    return (isinstance(s, A.CallStmt) and isinstance(s.call.func, A.Name)
            and s.call.func.name in action_names)


TableCall = Callable[[A.Stmt], bool]


def is_simple(s: A.Stmt, table_call: TableCall) -> bool:
    """True for statements that go into a synthesized action group; ``table_call`` says which
    direct action calls get their own table (those with compile-time arguments).  A ``for``
    loop joins a group whole (its backward jump needs one action) unless something in it
    must be a node of the control graph: an ``apply`` or a ``return`` from the block."""
    if isinstance(s, (A.Assign, A.VarDecl, A.Exit)):
        return True
    if isinstance(s, A.For):
        return loop_fits_an_action(s)
    if isinstance(s, A.CallStmt):
        f = s.call.func
        if isinstance(f, A.Member) and f.member == "apply":
            return False
        return not table_call(s)
    return False


def loop_fits_an_action(s: A.For) -> bool:
    """Whether a loop of an apply block can run inside one hidden action: it applies no table
    or control and does not return from the apply block."""
    return not any(isinstance(n, A.Return) or isinstance(n, A.Member) and n.member == "apply"
                   for n in nodes(s))


def group_order(body: A.Block, table_call: TableCall) -> dict[int, int]:
    """id(first statement of a group) → rank of its hidden action (block post-order)."""
    order: dict[int, int] = {}

    def visit_stmt(s: A.Stmt | None) -> None:
        if s is None:
            return
        if isinstance(s, A.Block):
            visit_block(s.stmts)
        elif isinstance(s, A.If):
            visit_stmt(s.then)
            visit_stmt(s.other)
        elif isinstance(s, A.Switch):
            for c in s.cases:
                visit_stmt(c.body)

    def visit_block(stmts: tuple[A.Stmt, ...]) -> None:
        for s in stmts:
            visit_stmt(s)
        first: A.Stmt | None = None
        for s in stmts:
            if is_simple(s, table_call):
                if first is None:
                    first = s
            else:
                if first is not None:
                    order[id(first)] = len(order)
                first = None
        if first is not None:
            order[id(first)] = len(order)

    visit_block(body.stmts)
    return order


def hidden_action_base(pos_file: str, line: int) -> str:
    """'l2_mcast46' for line 46 of l2_mcast.p4 (p4c names hidden actions this way)."""
    stem = Path(pos_file).stem or "act"
    stem = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    return f"{stem}{line}"
