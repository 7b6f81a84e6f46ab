"""Table loading details as bmv2 has them: a const LPM entry whose key has bits set past its
prefix (`10.1.2.3/8` in the P4 source, kept as written by p4c) is masked to the prefix, so
10.x.y.z all match; const entries on slice keys; a table with no actions."""
from __future__ import annotations

from typing import Any

import pytest

from bmv2json import F, prim, program
from netsum.match import MatchKind
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall
from netsum.switch.errors import SwitchError


EXTRACT_H = {"name": "start", "transition_key": [], "transitions": [
    {"type": "default", "value": None, "mask": None, "next_state": None}],
    "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}]}


def one_table(field: str, width: int, key: dict[str, Any], entry: dict[str, Any]) -> Device:
    """Header `h` (one field), table tbl_act_0 on `key` with const `entry` whose action
    `fwd` sends to port 3; a miss runs act_0 (port 0)."""
    doc = program(header_types=[{"name": "h_t", "fields": [[field, width, False]]}],
                  headers=[{"name": "h", "header_type": "h_t"}], parse_states=[EXTRACT_H],
                  actions=[[]], deparse=["h"])
    doc["actions"].append({"name": "fwd", "id": 1, "runtime_data": [],
                           "primitives": [prim("assign", F("standard_metadata", "egress_spec"),
                                               {"type": "hexstr", "value": "0x3"})]})
    t = doc["pipelines"][0]["tables"][0]
    t.update(key=[dict(key, target=["h", field])], match_type=key["match_type"],
             action_ids=[1, 0], actions=["fwd", "act_0"],
             next_tables={"fwd": None, "act_0": None},
             default_entry={"action_id": 0, "action_const": False, "action_data": [],
                            "action_entry_const": False},
             entries=[dict(entry, action_entry={"action_id": 1, "action_data": []},
                           priority=1)])
    dev = Device()
    dev.install(Device.build_pipeline(doc))
    return dev


def test_const_lpm_entry_is_masked_to_its_prefix() -> None:
    dev = one_table("dst", 32, {"match_type": "lpm", "name": "h.dst", "mask": None},
                    {"match_key": [{"match_type": "lpm", "key": "0x0a010203",
                                    "prefix_length": 8}]})
    assert dev.process(1, bytes([10, 200, 0, 1])) == [(3, bytes([10, 200, 0, 1]))]
    assert dev.process(1, bytes([10, 1, 2, 3])) == [(3, bytes([10, 1, 2, 3]))]
    assert dev.process(1, bytes([11, 1, 2, 3])) == [(0, bytes([11, 1, 2, 3]))]


def _slice_table(match_type: str, key_name: str, mask: str, entry: dict[str, Any]
                 ) -> Device:
    """A table keyed on a slice of the 16-bit `h.f` (p4c: the field with a mask, named after
    the source expression) with one const entry written at the slice's width, as p4c does."""
    return one_table("f", 16, {"match_type": match_type, "name": key_name, "mask": mask},
                     entry)


def _port(dev: Device, f: int) -> int:
    out = dev.process(1, f.to_bytes(2, "big"))
    assert len(out) == 1
    return out[0][0]


def test_const_entry_on_a_slice_key_is_moved_into_place() -> None:
    # h.f[11:4] == 0xab: p4c writes key "0xab" (slice width), mask 0x0ff0.
    dev = _slice_table("exact", "h.f[11:4]", "0x0ff0",
                       {"match_key": [{"match_type": "exact", "key": "0xab"}]})
    assert _port(dev, 0x0AB0) == 3
    assert _port(dev, 0xFAB7) == 3         # bits outside the slice do not matter
    assert _port(dev, 0x00AB) == 0         # the unshifted value is not the slice's


def test_const_ternary_and_lpm_entries_on_slice_keys() -> None:
    # h.f[15:8] &&& 0xf0 == 0xa0
    dev = _slice_table("ternary", "h.f[15:8]", "0xff00",
                       {"match_key": [{"match_type": "ternary", "key": "0xa0",
                                       "mask": "0xf0"}]})
    assert _port(dev, 0xA5FF) == 3
    assert _port(dev, 0xB500) == 0
    assert _port(dev, 0x00A0) == 0
    # h.f[7:0] (shift 0, but narrower than the field): 0x80/1 is the top bit of the low byte
    dev = _slice_table("lpm", "h.f[7:0]", "0x00ff",
                       {"match_key": [{"match_type": "lpm", "key": "0x80",
                                       "prefix_length": 1}]})
    assert _port(dev, 0xFF80) == 3
    assert _port(dev, 0x00C1) == 3
    assert _port(dev, 0x8000) == 0
    assert _port(dev, 0x007F) == 0


def test_a_masked_key_without_a_slice_name_keeps_its_values() -> None:
    # `h.f & 0x0ff0`: p4c writes the const value at the expression's (field's) width.
    dev = _slice_table("exact", "h.f & 0x0ff0", "0x0ff0",
                       {"match_key": [{"match_type": "exact", "key": "0x0ab0"}]})
    assert _port(dev, 0x1AB1) == 3
    assert _port(dev, 0x00AB) == 0


def test_table_with_no_actions_misses_and_runs_nothing() -> None:
    # `table t { key = {} actions = {} }` as netsum-p4c writes it (real p4c adds NoAction):
    # bmv2 loads it; applying it runs nothing and goes on to the next node, which here sets
    # the egress port.  Its default cannot be changed.
    doc = program(header_types=[{"name": "h_t", "fields": [["f", 8, False]]}],
                  headers=[{"name": "h", "header_type": "h_t"}], parse_states=[EXTRACT_H],
                  actions=[[], [prim("assign", F("standard_metadata", "egress_spec"),
                                     {"type": "hexstr", "value": "0x5"})]], deparse=["h"])
    t = doc["pipelines"][0]["tables"][0]
    t.update(action_ids=[], actions=[], next_tables={}, base_default_next="tbl_act_1",
             default_entry={"action_id": -1, "action_const": False, "action_data": [],
                            "action_entry_const": False})
    dev = Device()
    dev.install(Device.build_pipeline(doc))
    assert dev.process(1, b"\x07") == [(5, b"\x07")]
    assert dev.pipeline is not None
    table = dev.pipeline.tables["tbl_act_0"]
    with pytest.raises(SwitchError):
        table.set_default(ActionCall("act_1"))
    assert dev.process(1, b"\x07") == [(5, b"\x07")]


@pytest.mark.parametrize("label, entry, kind, lookup", [
    ("exact", {"key": "0x0ab0"}, MatchKind.EXACT, "exact"),
    ("lpm", {"key": "0x0a00", "prefix_length": 8}, MatchKind.LPM, "lpm"),
    ("ternary", {"key": "0x0a00", "mask": "0xff00"}, MatchKind.TERNARY, "generic"),
    ("range", {"start": "0x0a00", "end": "0x0aff"}, MatchKind.RANGE, "generic"),
    ("optional", {"key": "0x0ab0", "mask": "0xffff"}, MatchKind.OPTIONAL, "generic")])
def test_the_json_match_type_loads_as_its_match_kind(label: str, entry: dict[str, Any],
                                                     kind: MatchKind, lookup: str) -> None:
    dev = one_table("f", 16, {"match_type": label, "name": "h.f", "mask": None},
                    {"match_key": [dict(entry, match_type=label)]})
    assert dev.pipeline is not None
    table = dev.pipeline.tables["tbl_act_0"]
    assert table.key[0].match_type is kind and table.kind == lookup
    assert table.needs_priority == (label in ("ternary", "range", "optional"))
    assert _port(dev, 0x0AB0) == 3 and _port(dev, 0x0BB0) == 0
