"""The switch sets the global timestamps (one clock read per packet) only for a program that
uses them, found from the fields its operands name (netsum.switch.reads), not from names that
happen to contain "global_timestamp"."""
from __future__ import annotations

import time
from typing import Any

import pytest

from bmv2json import F, hexstr, prim, program
from netsum.switch.device import Device
from netsum.switch.native import build
from netsum.switch.pipeline import Pipeline, load_json
from p4helpers import netsum_config

EXTRACT_H = {"name": "start", "transition_key": [], "transitions": [
    {"type": "default", "value": None, "mask": None, "next_state": None}],
    "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}]}
H_T = {"name": "h_t", "fields": [["t", 48, False], ["my_global_timestamp", 16, False]]}
TO_PORT_1 = prim("assign", F("standard_metadata", "egress_spec"), hexstr(1))


def _doc(prims: list[dict[str, Any]], **sections: Any) -> dict[str, Any]:
    hdrs = [{"name": "h", "header_type": "h_t"}]
    return program(header_types=[H_T], headers=hdrs, parse_states=[EXTRACT_H],
                   actions=[prims + [TO_PORT_1]], deparse=["h"], **sections)


def _uses(doc: dict[str, Any]) -> bool:
    return Pipeline(doc).uses_timestamps


@pytest.mark.parametrize("native", [False, True], ids=["python", "native"])
def test_a_field_read_in_an_action_uses_them_and_gets_the_clock(native: bool) -> None:
    if native and (why := build.available()) is not None:
        pytest.skip(f"native backend not buildable: {why}")
    doc = _doc([prim("assign", F("h", "t"), F("standard_metadata", "ingress_global_timestamp"))])
    assert _uses(doc)
    pl = Pipeline(doc, native=native)
    assert (pl.native is not None) == native, pl.native_status
    dev = Device()
    dev.install(pl)
    time.sleep(0.002)                       # the clock counts µs from the switch's start
    out = dev.process(0, bytes(8))
    assert len(out) == 1 and out[0][0] == 1
    assert int.from_bytes(out[0][1][:6], "big") >= 2000


def test_names_that_only_look_like_it_do_not() -> None:
    # A header field and an action named like the timestamps; mark_to_drop(standard_metadata)
    # names the header but reads no timestamp.  (The substring test said "uses".)
    doc = _doc([prim("assign", F("h", "my_global_timestamp"), hexstr(7)),
                prim("mark_to_drop", {"type": "header", "value": "standard_metadata"})])
    doc["actions"][0]["name"] = "set_global_timestamp"
    doc["pipelines"][0]["tables"][0]["actions"] = ["set_global_timestamp"]
    doc["pipelines"][0]["tables"][0]["next_tables"] = {"set_global_timestamp": None}
    assert not _uses(doc)
    dev = Device()
    dev.install(Device.build_pipeline(doc))
    # The program still runs (TO_PORT_1 comes after the drop).
    assert dev.process(0, bytes(8)) == [(1, bytes(6) + (7).to_bytes(2, "big"))]


@pytest.mark.parametrize("where", ["table key", "condition", "header copy", "learn list",
                                   "egress stamp"])
def test_every_kind_of_reference_counts(where: str) -> None:
    doc = _doc([])
    ingress = doc["pipelines"][0]
    ts = F("standard_metadata", "ingress_global_timestamp")
    if where == "table key":
        ingress["tables"][0]["key"] = [{"match_type": "exact", "name": "ts",
                                        "target": ["standard_metadata",
                                                   "ingress_global_timestamp"], "mask": None}]
    elif where == "condition":
        ingress["conditionals"] = [{"name": "node_1", "id": 0, "true_next": "tbl_act_0",
                                    "false_next": None, "expression": {
                                        "type": "expression", "value": {
                                            "op": "==", "left": ts, "right": hexstr(0)}}}]
        ingress["init_table"] = "node_1"
    elif where == "header copy":
        # p4c copies standard_metadata whole for an action's inout parameter.
        doc["headers"].append({"name": "sm_copy", "id": 9, "header_type": "standard_metadata",
                               "metadata": True})
        doc["actions"][0]["primitives"].insert(0, prim(
            "assign_header", {"type": "header", "value": "sm_copy"},
            {"type": "header", "value": "standard_metadata"}))
    elif where == "learn list":
        doc["learn_lists"] = [{"name": "dg", "id": 1, "elements": [ts]}]
    else:
        doc["actions"][0]["primitives"].insert(0, prim(
            "assign", F("h", "t"), F("standard_metadata", "egress_global_timestamp")))
    assert _uses(doc)


def test_netsum_p4_does_not_use_them() -> None:
    # The aggregation program reads no timestamp: no clock read on its packet path.
    assert not _uses(load_json(netsum_config()))
