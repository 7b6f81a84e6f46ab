"""Hand-written BMv2 JSON for constructs that no real p4c output in tests/fixtures/p4c holds.

Written from bmv2's docs/JSON_format.md (format 2.24) and the shapes p4c's bmv2 backend emits
(backends/bmv2/common: one action per `actions[]` entry, jumps with absolute hexstr targets,
hidden keyless tables `tbl_*` with a const default to run an action from `apply`).  A program is
one parser, an ingress that runs `actions` in order through hidden tables, an empty egress and a
deparser; `standard_metadata` is always there.
"""
from __future__ import annotations

from typing import Any

__all__ = ["F", "hexstr", "expr", "prim", "program", "STANDARD_METADATA"]

STANDARD_METADATA = [
    ["ingress_port", 9, False], ["egress_spec", 9, False], ["egress_port", 9, False],
    ["instance_type", 32, False], ["packet_length", 32, False], ["enq_timestamp", 32, False],
    ["enq_qdepth", 19, False], ["deq_timedelta", 32, False], ["deq_qdepth", 19, False],
    ["ingress_global_timestamp", 48, False], ["egress_global_timestamp", 48, False],
    ["mcast_grp", 16, False], ["egress_rid", 16, False], ["checksum_error", 1, False],
    ["parser_error", 32, False], ["priority", 3, False], ["_padding", 3, False]]


def F(header: str, field: str) -> dict[str, Any]:
    return {"type": "field", "value": [header, field]}


def hexstr(v: int) -> dict[str, Any]:
    return {"type": "hexstr", "value": hex(v) if v >= 0 else "-" + hex(-v)}


def expr(op: str, left: Any, right: Any, wrap: int = 1) -> dict[str, Any]:
    """An expression node; p4c wraps a primitive parameter twice (`wrap=2`)."""
    node: dict[str, Any] = {"op": op, "left": left, "right": right}
    for _ in range(wrap):
        node = {"type": "expression", "value": node}
    return node


def prim(op: str, *params: Any) -> dict[str, Any]:
    return {"op": op, "parameters": list(params)}


def program(header_types: list[dict[str, Any]], headers: list[dict[str, Any]],
            parse_states: list[dict[str, Any]], actions: list[list[dict[str, Any]]],
            deparse: list[str], **sections: Any) -> dict[str, Any]:
    """`actions[i]` (a primitive list) becomes action `act_i`, run in order by hidden table
    `tbl_act_i`; `sections` adds or replaces top-level keys (header_stacks, ...)."""
    types = [{"name": "standard_metadata", "id": 0, "fields": STANDARD_METADATA}]
    types += [dict(t, id=i + 1) for i, t in enumerate(header_types)]
    hdrs = [{"name": "standard_metadata", "id": 0, "header_type": "standard_metadata",
             "metadata": True, "pi_omit": True}]
    hdrs += [dict({"metadata": False}, **h, id=i + 1) for i, h in enumerate(headers)]
    acts, tables = [], []
    for i, prims in enumerate(actions):
        acts.append({"name": f"act_{i}", "id": i, "runtime_data": [], "primitives": prims})
        nxt = f"tbl_act_{i + 1}" if i + 1 < len(actions) else None
        tables.append({
            "name": f"tbl_act_{i}", "id": i, "key": [], "match_type": "exact",
            "type": "simple", "max_size": 1024, "with_counters": False,
            "support_timeout": False, "direct_meters": None, "action_ids": [i],
            "actions": [f"act_{i}"], "base_default_next": nxt, "next_tables": {f"act_{i}": nxt},
            "default_entry": {"action_id": i, "action_const": True, "action_data": [],
                              "action_entry_const": True}})
    doc: dict[str, Any] = {
        "header_types": types, "headers": hdrs, "header_stacks": [], "header_union_types": [],
        "header_unions": [], "header_union_stacks": [], "field_lists": [],
        "errors": [["NoError", 0], ["PacketTooShort", 1], ["NoMatch", 2],
                   ["StackOutOfBounds", 3], ["HeaderTooShort", 4], ["ParserTimeout", 5],
                   ["ParserInvalidArgument", 6]],
        "enums": [],
        "parsers": [{"name": "parser", "id": 0, "init_state": parse_states[0]["name"],
                     "parse_states": [dict(s, id=i) for i, s in enumerate(parse_states)]}],
        "parse_vsets": [],
        "deparsers": [{"name": "deparser", "id": 0, "order": deparse, "primitives": []}],
        "meter_arrays": [], "counter_arrays": [], "register_arrays": [], "calculations": [],
        "learn_lists": [], "actions": acts,
        "pipelines": [
            {"name": "ingress", "id": 0, "init_table": "tbl_act_0" if actions else None,
             "tables": tables, "action_profiles": [], "conditionals": []},
            {"name": "egress", "id": 1, "init_table": None, "tables": [],
             "action_profiles": [], "conditionals": []}],
        "checksums": [], "force_arith": [], "extern_instances": [], "field_aliases": [],
        "program": "hand-written", "__meta__": {"version": [2, 24], "compiler": "tests"}}
    doc.update(sections)
    return doc
