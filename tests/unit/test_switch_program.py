"""The typed program model (netsum.switch.program): what the loader keeps of each checksum and
each action, and that every consumer reads them from there (the JSON's checksums and actions
are read once, by the loader)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Lpm, TableEntry
from netsum.switch.errors import ConfigError
from netsum.switch.layout import FieldSlot
from netsum.switch.native import build
from netsum.switch.pipeline import Pipeline
from netsum.switch.program import (Action, Checksum, KeyElement, Transition, load_actions,
                                   load_controls, load_deparser, load_parser)

ROUTER = json.loads((Path(__file__).resolve().parents[1] / "switch_json" / "router.json")
                    .read_text())


def test_the_router_checksum_as_loaded() -> None:
    pl = Pipeline(copy.deepcopy(ROUTER))
    ipv4 = pl.layout.headers["ipv4"]
    slot = dict(ipv4.fields)["hdrChecksum"]
    assert pl.checksums == (Checksum(
        "cksum", "checksums[0] ('cksum')", "calc", ["ipv4", "hdrChecksum"],
        FieldSlot(slot.index, 16, False), ROUTER["checksums"][0]["if_cond"], False, True),)


class _Once(dict):  # type: ignore[type-arg]
    """A program whose `checksums` and `actions` may each be read once (by the loader) and
    never again; iterating over the program's keys (a walk over the whole JSON) is allowed."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.counts = {"checksums": 0, "actions": 0, "deparsers": 0, "pipelines": 0,
                       "parsers": 0}

    @property
    def reads(self) -> int:
        return self.counts["checksums"]

    def get(self, key, default=None):  # type: ignore[no-untyped-def, override]
        if key in self.counts:
            self.counts[key] += 1
            assert self.counts[key] == 1, f"the JSON's {key} were read after loading"
        return super().get(key, default)

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        assert key not in self.counts, f"the JSON's {key} were read by subscript"
        return super().__getitem__(key)


@pytest.mark.parametrize("native", [False, True], ids=["python", "native"])
def test_checksums_are_read_from_the_json_once_and_still_computed(native: bool) -> None:
    if native and (why := build.available()) is not None:
        pytest.skip(f"native backend not buildable: {why}")
    doc = _Once(copy.deepcopy(ROUTER))
    pl = Pipeline(doc, native=native)
    assert (pl.native is not None) == native, pl.native_status
    assert doc.reads == 1
    assert pl.update_checksums is not None and pl.verify_checksums is None


def test_the_router_actions_as_loaded() -> None:
    """Parameters and ids as router.json declares them (see its 'actions'), in JSON order."""
    pl = Pipeline(copy.deepcopy(ROUTER))
    got = [(a.index, a.name, a.id, a.params, len(a.primitives)) for a in pl.action_defs]
    assert got == [
        (0, "NoAction", 0, (), 0),
        (1, "MyIngress.drop", 1, (), 1),
        (2, "MyIngress.ipv4_forward", 2, (("dstAddr", 48), ("port", 9)), 5),
        (3, "MyIngress.set_tos", 3, (("tos", 8),), 1),
        (4, "act", 4, (), 1)]
    fwd = pl.action_defs[2]
    assert fwd.path == "actions[2] ('MyIngress.ipv4_forward')" and fwd.widths == (48, 9)
    assert fwd.primitives[0]["op"] == "assign"


@pytest.mark.parametrize("native", [False, True], ids=["python", "native"])
def test_actions_are_read_from_the_json_once_and_still_run(native: bool) -> None:
    """The JSON's actions are read by the loader alone; the table's action then runs as the
    router's ipv4_forward says: egress port and destination MAC from the entry's parameters,
    the old destination MAC becomes the source, TTL one less."""
    if native and (why := build.available()) is not None:
        pytest.skip(f"native backend not buildable: {why}")
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether
    doc = _Once(copy.deepcopy(ROUTER))
    pl = Pipeline(doc, native=native)
    if native:
        assert pl.wait_native(60) == "native", pl.native_status
    assert doc.counts == {"checksums": 1, "actions": 1, "deparsers": 1, "pipelines": 1,
                          "parsers": 1}
    d = Device()
    d.install(pl)
    d.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        (Lpm(0x0A000000, 8),), ActionCall("MyIngress.ipv4_forward", (0xAABBCCDDEEFF, 3))))
    frame = bytes(Ether(src="00:00:00:00:00:01", dst="02:00:00:00:00:02") /
                  IP(src="10.0.0.1", dst="10.1.2.3", ttl=64))
    [(port, out)] = d.process(1, frame)
    e = Ether(out)
    assert (port, e.dst, e.src, e[IP].ttl) == (3, "aa:bb:cc:dd:ee:ff", "02:00:00:00:00:02", 63)


@pytest.mark.parametrize("mutate, where", [
    (lambda a: a.__setitem__("runtime_data", [{"name": "x", "bitwidth": 0}]),
     "actions[2] ('MyIngress.ipv4_forward').runtime_data[0]"),
    (lambda a: a.__setitem__("runtime_data", [{"name": "x", "bitwidth": True}]),
     "actions[2] ('MyIngress.ipv4_forward').runtime_data[0]"),
    (lambda a: a.__setitem__("primitives", {"op": "drop"}),
     "actions[2] ('MyIngress.ipv4_forward').primitives"),
    (lambda a: a.__setitem__("id", "2"), "actions[2] ('MyIngress.ipv4_forward')"),
    (lambda a: a.__setitem__("id", 1), "actions[2] ('MyIngress.ipv4_forward')"),
    (lambda a: a.pop("name"), "actions[2]"),
], ids=["zero-width", "bool-width", "primitives-not-list", "string-id", "duplicate-id",
        "no-name"])
def test_a_malformed_action_is_refused_naming_it(mutate, where) -> None:  # type: ignore[no-untyped-def]
    j = copy.deepcopy(ROUTER)
    mutate(j["actions"][2])
    with pytest.raises(ConfigError) as e:
        load_actions(j)
    assert where in str(e.value)
    with pytest.raises(ConfigError):
        Pipeline(j)


def test_load_actions_keeps_json_order_and_defaults() -> None:
    """An entry without id takes its index (as the loader always did), without runtime_data
    or primitives has none; a parameter without a name is called p<k>."""
    got = load_actions({"actions": [{"name": "a", "id": 7, "runtime_data": [{"bitwidth": 3}]},
                                    {"name": "b"}]})
    assert got == (Action(0, "a", 7, "actions[0] ('a')", (("p0", 3),), ()),
                   Action(1, "b", 1, "actions[1] ('b')", (), ()))
    assert (got[0].fname, Action(0, "n", -4, "", (), ()).fname) == ("A7", "A_4")


def test_the_router_deparser_as_loaded() -> None:
    """router.json's deparser emits ethernet then ipv4 (its 'order'); metadata is never
    emitted, so a metadata header named in the order is left out."""
    pl = Pipeline(copy.deepcopy(ROUTER))
    assert pl.deparser.path == "deparsers[0] ('deparser')"
    assert [h.name for h in pl.deparser.headers] == ["ethernet", "ipv4"]
    j = copy.deepcopy(ROUTER)
    j["deparsers"][0]["order"] = ["scalars", "ethernet", "standard_metadata", "ipv4"]
    assert [h.name for h in load_deparser(j, pl.layout).headers] == ["ethernet", "ipv4"]


@pytest.mark.parametrize("mutate, message", [
    (lambda j: j["deparsers"][0].__setitem__("name", "other"), "no deparser named 'deparser'"),
    (lambda j: j["deparsers"][0].__setitem__("order", ["ethernet", "nope"]),
     "deparsers[0] ('deparser').order[1]"),
    (lambda j: j["deparsers"][0].__setitem__("primitives", [{"op": "emit"}]),
     "deparser primitives are not supported"),
    (lambda j: j["deparsers"][0].__setitem__("order", "ethernet"), ".order"),
], ids=["none", "unknown-header", "primitives", "order-not-list"])
def test_a_malformed_deparser_is_refused_naming_it(mutate, message) -> None:  # type: ignore[no-untyped-def]
    j = copy.deepcopy(ROUTER)
    mutate(j)
    with pytest.raises(ConfigError) as e:
        Pipeline(j)
    assert message in str(e.value)


def test_the_router_controls_as_loaded() -> None:
    """router.json's ingress: lpm -> acl -> (a conditional) -> tbl_act, entered at node_2; its
    egress is empty.  Each table's key, actions and next nodes as the file writes them."""
    ctl = load_controls(copy.deepcopy(ROUTER))
    ing, eg = ctl["ingress"], ctl["egress"]
    assert (ing.path, ing.init_table, eg.init_table, eg.tables) == \
        ("pipelines[0] ('ingress')", "node_2", None, ())
    lpm, acl, act = ing.tables
    assert lpm.path == "pipelines[0] ('ingress').tables[0] ('MyIngress.ipv4_lpm')"
    assert lpm.key == (KeyElement("hdr.ipv4.dstAddr", "lpm", ["ipv4", "dstAddr"], None),)
    assert lpm.actions == (("MyIngress.ipv4_forward", 2), ("MyIngress.drop", 1), ("NoAction", 0))
    assert (lpm.base_default_next, lpm.max_size, acl.max_size) == ("MyIngress.acl", 1024, 4)
    assert [k.match_type for k in acl.key] == ["ternary", "optional", "range"]
    assert act.next_tables == {"act": None} and act.base_default_next is None
    assert [(c.name, c.true_next, c.false_next) for c in ing.conditionals] == \
        [("node_2", "MyIngress.ipv4_lpm", None), ("node_5", "tbl_act", None)]


@pytest.mark.parametrize("mutate, message", [
    (lambda j: j["pipelines"].pop(), "no pipeline named 'egress'"),
    (lambda j: j["pipelines"][0]["tables"][1].__setitem__("action_ids", [3]),
     "tables[1] ('MyIngress.acl'): 'actions' and 'action_ids' differ in length"),
    (lambda j: j["pipelines"][0]["tables"][0].__setitem__("next_tables", ["x"]),
     "tables[0] ('MyIngress.ipv4_lpm').next_tables"),
    (lambda j: j["pipelines"][0]["tables"][0]["key"].__setitem__(0, "ipv4.dstAddr"),
     "tables[0] ('MyIngress.ipv4_lpm').key[0]"),
    (lambda j: j["pipelines"][0]["tables"][2].__setitem__("max_size", "big"),
     "tables[2] ('tbl_act')"),
    (lambda j: j["pipelines"][0]["tables"][2].pop("name"), "pipelines[0] ('ingress').tables[2]"),
    (lambda j: j["pipelines"][0]["conditionals"][1].__setitem__("name", 5),
     "pipelines[0] ('ingress').conditionals[1]"),
], ids=["no-egress", "action-ids", "next-tables", "key-element", "max-size", "table-name",
        "conditional-name"])
def test_a_malformed_control_is_refused_naming_it(mutate, message) -> None:  # type: ignore[no-untyped-def]
    j = copy.deepcopy(ROUTER)
    mutate(j)
    with pytest.raises(ConfigError) as e:
        load_controls(j)
    assert message in str(e.value)
    with pytest.raises(ConfigError):
        Pipeline(j)


def test_the_router_parser_as_loaded() -> None:
    """router.json's parser: start -> parse_ipv4 on etherType 0x0800, else accept; parse_ipv4
    accepts.  Operations and keys as the file writes them; its defaults are written the older
    way (value "default", no type), which is a default all the same."""
    j = copy.deepcopy(ROUTER)
    p = load_parser(j)
    assert (p.path, p.init_state, [s.name for s in p.states]) == \
        ("parsers[0] ('parser')", "start", ["start", "parse_ipv4"])
    start, ipv4 = p.states
    assert start.transitions == (Transition("hexstr", "0x0800", None, "parse_ipv4"),
                                 Transition("hexstr", "default", None, None))
    assert [t.is_default for t in start.transitions] == [False, True]
    assert start.transition_key == ({"type": "field", "value": ["ethernet", "etherType"]},)
    assert [op["op"] for op in start.ops] == ["extract"] and ipv4.transitions[-1].is_default


@pytest.mark.parametrize("mutate, message", [
    (lambda j: j["parsers"][0].__setitem__("name", "p"), "no parser named 'parser'"),
    (lambda j: j["parsers"][0].__setitem__("init_state", "nope"), "init_state 'nope'"),
    (lambda j: j["parsers"][0]["parse_states"][0]["transitions"][0].__setitem__(
        "next_state", "nope"), "parse_states[0] ('start').transitions[0]"),
    (lambda j: j["parsers"][0]["parse_states"][0]["parser_ops"].append(3),
     "parse_states[0] ('start').parser_ops[1]"),
    (lambda j: j["parsers"][0]["parse_states"][1].__setitem__("name", None),
     "parsers[0] ('parser').parse_states[1]"),
    (lambda j: j["parsers"][0]["parse_states"][1]["transitions"].__setitem__(0, "x"),
     "parse_states[1] ('parse_ipv4').transitions[0]"),
], ids=["none", "init", "next-state", "op", "state-name", "transition"])
def test_a_malformed_parser_is_refused_naming_it(mutate, message) -> None:  # type: ignore[no-untyped-def]
    j = copy.deepcopy(ROUTER)
    mutate(j)
    with pytest.raises(ConfigError) as e:
        load_parser(j)
    assert message in str(e.value)
    with pytest.raises(ConfigError):
        Pipeline(j)
