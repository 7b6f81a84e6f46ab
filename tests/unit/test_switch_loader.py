"""The loader rejects unsupported or malformed BMv2 JSON with a ConfigError naming the object
and its JSON path, at load time, and never with any other exception."""
from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from netsum.switch.device import Device
from netsum.switch.errors import ConfigError

ROUTER = json.loads((Path(__file__).resolve().parents[1] / "switch_json" / "router.json")
                    .read_text())


def action(j: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in j["actions"] if a["name"] == name)


def table(j: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for p in j["pipelines"] for t in p["tables"] if t["name"] == name)


def set_(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def f(j: dict[str, Any]) -> None:
        o = j
        for k in path[:-1]:
            o = o[k]
        o[path[-1]] = value
    return f


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("version", set_(["__meta__", "version"], [3, 0]), "__meta__.version"),
    ("minor", set_(["__meta__", "version"], [2, 99]), "2.99 is not supported"),
    ("primitive", lambda j: action(j, "MyIngress.drop")["primitives"][0].update(op="frobnicate"),
     "actions[1] ('MyIngress.drop').primitives[0]: primitive 'frobnicate' is not supported"),
    ("field", lambda j: action(j, "MyIngress.set_tos")["primitives"][0]["parameters"][0]
     .update(value=["ipv4", "nope"]), "header 'ipv4' has no field 'nope'"),
    ("header", lambda j: action(j, "MyIngress.set_tos")["primitives"][0]["parameters"][0]
     .update(value=["ipv6", "x"]), "unknown header instance 'ipv6'"),
    ("next", lambda j: table(j, "MyIngress.acl")["next_tables"].update(NoAction="nowhere"),
     "unknown next node 'nowhere'"),
    ("action id", lambda j: table(j, "MyIngress.acl").update(action_ids=[3, 1, 2]),
     "tables[1] ('MyIngress.acl'): action id 2 ('NoAction') is not a known action"),
    ("no parser", set_(["parsers"], []), "no parser named 'parser'"),
    ("no egress", lambda j: j["pipelines"].pop(1), "no pipeline named 'egress'"),
    ("hexstr", lambda j: table(j, "MyIngress.ipv4_lpm")["default_entry"].update(
        action_id=2, action_data=["zz", "0x1"]), "bad hexstr 'zz'"),
    ("unaligned", lambda j: j["header_types"][2]["fields"].append(["x", 3, False]),
     "not a whole number of bytes"),
    ("varbit", lambda j: j["header_types"][3].update(
        fields=j["header_types"][3]["fields"] + [["o1", "*"], ["o2", "*"]], max_length=64),
     "only one variable-length field"),
    ("algo", lambda j: j["calculations"][0].update(algo="crc64_custom"),
     "hash algorithm 'crc64_custom' is not supported"),
    ("profile", lambda j: j["pipelines"][0].update(action_profiles=[{"name": "p", "selector": {
        "algo": "crc16", "input": [{"type": "hexstr", "value": "0x1"}]}}]),
     "action_profiles[0] ('p').selector.input[0]: selector input"),
    ("match type", lambda j: table(j, "MyIngress.acl")["key"][0].update(match_type="fuzzy"),
     "match type 'fuzzy' is not supported"),
    ("jump", lambda j: action(j, "MyIngress.drop")["primitives"].insert(
        0, {"op": "_jump", "parameters": [{"type": "hexstr", "value": "0x63"}]}),
     "jump target 99 outside"),
    ("expr op", lambda j: action(j, "MyIngress.set_tos")["primitives"][0]["parameters"]
     .__setitem__(1, {"type": "expression", "value": {"op": "frob", "left": None,
                                                     "right": None}}),
     "expression op 'frob' is not supported"),
    ("register", lambda j: action(j, "MyIngress.drop")["primitives"].append(
        {"op": "register_read", "parameters": [{"type": "field", "value": ["ipv4", "ttl"]},
                                              {"type": "register_array", "value": "r"},
                                              {"type": "hexstr", "value": "0x0"}]}),
     "unknown register_array 'r'"),
    ("state", lambda j: j["parsers"][0]["parse_states"][0]["transitions"][0]
     .update(next_state="parse_ipv6"), "unknown next_state 'parse_ipv6'"),
    ("std", lambda j: j["header_types"][1]["fields"].pop(0),
     "standard_metadata.ingress_port is required"),
    ("headers type", set_(["headers"], 5), "headers: expected a list"),
    # values spliced into generated code must be validated ints: the JSON may come from any
    # P4Runtime client
    ("lookahead injection", lambda j: j["parsers"][0]["parse_states"][0].update(
        transition_key=[{"type": "lookahead", "value": ["0); import os; (", 8]}]),
     "bad lookahead"),
    ("control loop", lambda j: table(j, "tbl_act")["next_tables"].update(
        act="MyIngress.ipv4_lpm"), "control flow loops through 'MyIngress.ipv4_lpm'"),
    ("huge width", lambda j: j["header_types"][2]["fields"].append(["big", 10**9, False]),
     "outside 1..4096"),
    ("huge register", lambda j: j.update(register_arrays=[
        {"name": "r", "id": 0, "size": 10**12, "bitwidth": 32}]), "bad size"),
    ("cast width", lambda j: action(j, "MyIngress.set_tos")["primitives"][0]["parameters"]
     .__setitem__(1, {"type": "expression", "value": {
         "op": "two_comp_mod", "left": {"type": "hexstr", "value": "0x1"},
         "right": {"type": "hexstr", "value": hex(10**9)}}}), "bad width operand"),
    # checksums, loaded into the program model (netsum.switch.program)
    ("checksum calculation", lambda j: j["checksums"][0].update(calculation="nope"),
     "checksums[0] ('cksum'): unknown calculation 'nope'"),
    ("checksum target", lambda j: j["checksums"][0].update(target=["ipv4", "nope"]),
     "checksums[0] ('cksum').target: header 'ipv4' has no field 'nope'"),
    ("checksum name", lambda j: j["checksums"][0].pop("name"),
     "checksums[0]: expected an object with a string 'name'"),
    ("checksums type", set_(["checksums"], 5), "checksums: expected a list"),
    ("checksum condition", lambda j: j["checksums"][0].update(if_cond={
        "type": "expression", "value": {"op": "frob", "left": None, "right": None}}),
     "expression op 'frob' is not supported"),
]


@pytest.mark.parametrize("name, mutate, message", CASES, ids=[c[0] for c in CASES])
def test_config_errors_name_object_and_path(name: str, mutate: Callable[[dict[str, Any]], None],
                                            message: str) -> None:
    j = copy.deepcopy(ROUTER)
    mutate(j)
    with pytest.raises(ConfigError) as ei:
        Device.build_pipeline(json.dumps(j))
    assert message in str(ei.value)


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1, 2]", b"\xff\xfe", b"{\"a\": }"])
def test_not_a_json_object(raw: bytes) -> None:
    with pytest.raises(ConfigError):
        Device.build_pipeline(raw)


JUNK: list[Any] = [None, 0, -1, "x", [], {}, [None], {"type": "field"}, True, 2**70, "0x"]


def _paths(o: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(o, dict):
        for k, v in o.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            out += _paths(v, prefix + (i,))
    return out


def test_random_mutations_only_raise_config_error() -> None:
    rnd = random.Random(4)
    paths = _paths(ROUTER)
    for _ in range(300):
        j = copy.deepcopy(ROUTER)
        path = rnd.choice(paths)
        o = j
        for k in path[:-1]:
            o = o[k]
        o[path[-1]] = rnd.choice(JUNK)
        try:
            Device.build_pipeline(j)
        except ConfigError:
            pass


def test_fixture_loads_unchanged() -> None:
    Device.build_pipeline(ROUTER)


def test_packet_controlled_shift_is_bounded() -> None:
    """`ttl << srcAddr` with srcAddr = 2**32-1 must not try to build a 4-Gbit integer."""
    j = copy.deepcopy(ROUTER)
    action(j, "MyIngress.set_tos")["primitives"][0]["parameters"][1] = {
        "type": "expression", "value": {"type": "expression", "value": {
            "op": "&", "right": {"type": "hexstr", "value": "0xff"},
            "left": {"type": "expression", "value": {
                "op": "<<", "left": {"type": "field", "value": ["ipv4", "ttl"]},
                "right": {"type": "field", "value": ["ipv4", "srcAddr"]}}}}}}
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    from netsum.switch.entries import (ActionCall, Lpm, Optional as Opt, Range, TableEntry,
                                Ternary)
    d = Device()
    d.install(Device.build_pipeline(j))
    pl = d.pipeline
    pl.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        (Lpm(0, 0),), ActionCall("MyIngress.ipv4_forward", (1, 2))))
    pl.tables["MyIngress.acl"].insert(TableEntry(
        (Ternary(0, 0), Opt(None), Range(0, 0xFFFF)), ActionCall("MyIngress.set_tos", (0,)),
        priority=1))
    for src, tos in (("255.255.255.255", 0), ("0.0.0.1", (63 << 1) & 0xFF)):
        [(_, out)] = d.process(1, bytes(Ether() / IP(src=src, dst="1.2.3.4", ttl=64)))
        assert Ether(out)[IP].tos == tos


def test_parser_loop_hits_parser_timeout() -> None:
    j = copy.deepcopy(ROUTER)
    st = j["parsers"][0]["parse_states"][1]           # parse_ipv4 -> itself, consuming nothing
    st["parser_ops"] = []
    st["transitions"] = [{"value": "default", "mask": None, "next_state": "parse_ipv4"}]
    d = Device()
    d.install(Device.build_pipeline(j))
    frame = bytes(14 + 20)[:12] + b"\x08\x00" + bytes(20)
    d.process(1, frame)
    assert d.stats.parser_errors == 1 and d.stats.internal_errors == 0
