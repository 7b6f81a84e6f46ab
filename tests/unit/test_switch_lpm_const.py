"""A const LPM entry whose key has bits set past its prefix (`10.1.2.3/8` in the P4 source,
kept as written by p4c): bmv2 masks the key to the prefix, so 10.x.y.z all match."""
from __future__ import annotations

from bmv2json import F, prim, program
from switch.device import Device


def test_const_lpm_entry_is_masked_to_its_prefix() -> None:
    doc = program(
        header_types=[{"name": "h_t", "fields": [["dst", 32, False]]}],
        headers=[{"name": "h", "header_type": "h_t"}],
        parse_states=[{"name": "start", "transition_key": [], "transitions": [
            {"type": "default", "value": None, "mask": None, "next_state": None}],
            "parser_ops": [{"op": "extract", "parameters": [{"type": "regular",
                                                              "value": "h"}]}]}],
        actions=[[]], deparse=["h"])
    doc["actions"].append({"name": "fwd", "id": 1, "runtime_data": [{"name": "p",
                                                                      "bitwidth": 9}],
                           "primitives": [prim("assign", F("standard_metadata", "egress_spec"),
                                               {"type": "runtime_data", "value": 0})]})
    t = doc["pipelines"][0]["tables"][0]
    t.update(key=[{"match_type": "lpm", "name": "h.dst", "target": ["h", "dst"], "mask": None}],
             match_type="lpm", action_ids=[1, 0], actions=["fwd", "act_0"],
             next_tables={"fwd": None, "act_0": None},
             default_entry={"action_id": 0, "action_const": False, "action_data": [],
                            "action_entry_const": False},
             entries=[{"match_key": [{"match_type": "lpm", "key": "0x0a010203",
                                      "prefix_length": 8}],
                       "action_entry": {"action_id": 1, "action_data": ["0x3"]},
                       "priority": 1}])
    dev = Device()
    dev.install(Device.build_pipeline(doc))
    assert dev.process(1, bytes([10, 200, 0, 1])) == [(3, bytes([10, 200, 0, 1]))]
    assert dev.process(1, bytes([10, 1, 2, 3])) == [(3, bytes([10, 1, 2, 3]))]
    assert dev.process(1, bytes([11, 1, 2, 3])) == [(0, bytes([11, 1, 2, 3]))]
