"""The client library's P4Info lookups over real p4c output: names, aliases, suggestions, entity encode/decode."""
from __future__ import annotations

from pathlib import Path

import pytest

from netsum.match import Exact, Range, Ternary
from netsum.p4rt import entities
from netsum.p4rt.errors import ClientError, LiteralError, SchemaLookupError
from netsum.p4rt.pre import MulticastGroup
from netsum.p4rt.schema import Schema, load_p4info


@pytest.fixture
def l2(p4c_fixtures: Path) -> Schema:
    return Schema(load_p4info(p4c_fixtures / "l2_mcast.p4info.txtpb"))


@pytest.mark.parametrize("name, full", [
    ("dmac", "L2Ingress.dmac"), ("L2Ingress.acl", "L2Ingress.acl"),
    ("replica_rewrite", "L2Egress.replica_rewrite"),
])
def test_table_by_name_or_alias(l2: Schema, name: str, full: str) -> None:
    assert l2.table(name).name == full


@pytest.mark.parametrize("lookup, message", [
    (lambda s: s.table("dmca"), "no table named 'dmca'. Did you mean 'dmac'?"),
    (lambda s: s.table("ipv4_lpm"), "no table named 'ipv4_lpm'"),
    (lambda s: s.action("forwad"), "no action named 'forwad'. Did you mean 'forward'?"),
    (lambda s: s.table_action(s.table("dmac"), "deny"),
     "action 'deny' is not an action of table 'dmac' (its actions: forward, flood, NoAction)"),
    (lambda s: s.key_field(s.table("acl"), "hdr.eth.srx"), "Did you mean 'hdr.eth.src'?"),
    (lambda s: s.counter("dmac_hits"), "'dmac_hits' is a direct counter of table 'dmac'"),
    (lambda s: s.counter("hits"), "no counter named 'hits': the program has no counters"),
])
def test_lookup_errors_suggest(l2: Schema, lookup, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SchemaLookupError) as info:
        lookup(l2)
    assert message in str(info.value)


def test_table_facts(l2: Schema) -> None:
    acl = l2.table("acl")
    assert acl.needs_priority and not l2.table("dmac").needs_priority
    assert l2.table("dmac").direct_counter_id == 334377091
    assert [f.bitwidth for f in acl.match_fields] == [48, 12, 9]


def test_entry_round_trip_omits_dont_care(l2: Schema) -> None:
    e = entities.parse_table_entry(l2, "acl", "deny", ["0&&&0", "5&&&0xfff", "0->511"], [], "10")
    ent = e.encode(l2)
    # Only the vlan field constrains the entry; the wildcards are omitted (spec §9.1.1).
    assert [m.field_id for m in ent.table_entry.match] == [2]
    back = entities.TableEntry.decode(ent, l2)
    assert back.match == (("hdr.vlan.vid", Ternary(5, 0xFFF)),)
    assert (back.action, back.priority) == ("L2Ingress.deny", 10)


def test_parse_table_entry_values(l2: Schema) -> None:
    e = entities.parse_table_entry(l2, "dmac", "forward", ["00:00:00:00:00:01"], ["3"])
    assert e.match == (("hdr.eth.dst", Exact(1)),) and e.params == (3,)
    ent = e.encode(l2)
    assert ent.table_entry.action.action.params[0].value == b"\x03"
    r = entities.parse_table_entry(l2, "acl", "to_cpu_copy", ["0&&&0", "0&&&0", "1->4"],
                                   ["100"], "1")
    # The two ternary wildcards are left out, as the switch reports them (spec §9.1.1).
    assert r.match == (("sm.ingress_port", Range(1, 4)),)


@pytest.mark.parametrize("args, fragment", [
    (("dmac", "forward", ["1", "2"], ["3"], None), "needs 1 key value(s) (hdr.eth.dst:exact)"),
    (("dmac", "forward", ["1"], [], None), "takes 1 parameter(s) (port), got 0"),
    (("dmac", "forward", ["1"], ["512"], None), "does not fit in bit<9>"),
    (("dmac", "forward", ["1"], ["3"], "5"), "takes no priority"),
    (("acl", "deny", ["1", "1", "1->2"], [], None), "give a priority"),
    (("acl", "deny", ["1", "1", "1->2"], [], "0"), "priority must be > 0"),
    (("dmac", "forward", ["zz"], ["1"], None), "not a number"),
])
def test_parse_table_entry_errors(l2: Schema, args, fragment: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LiteralError) as info:
        entities.parse_table_entry(l2, *args)
    assert fragment in str(info.value)


def test_multicast_group_round_trip() -> None:
    g = MulticastGroup(5, ((1, 1), (2, 2)))
    assert MulticastGroup.decode(g.encode()) == g


@pytest.mark.parametrize("text, fragment", [
    ("tables { preamble { id: 1 ", "does not parse"),
    ("pkg_info { arch: \"v1model\" }", "declares no tables or actions"),
])
def test_load_p4info_errors(tmp_path: Path, text: str, fragment: str) -> None:
    p = tmp_path / "x.p4info.txtpb"
    p.write_text(text)
    with pytest.raises(ClientError, match=fragment):
        load_p4info(p)
    with pytest.raises(ClientError, match="cannot read"):
        load_p4info(tmp_path / "missing.txt")


def test_multicast_replica_order_does_not_matter() -> None:
    # PI reads replicas back grouped by rid, not in the order they were written.
    assert MulticastGroup(3, ((5, 2), (1, 1), (4, 2))) == \
        MulticastGroup(3, ((1, 1), (4, 2), (5, 2)))


def test_decoded_match_is_in_key_order(l2: Schema) -> None:
    e = entities.parse_table_entry(l2, "acl", "deny", ["1&&&1", "5&&&0xfff", "1->4"], [], "3")
    ent = e.encode(l2)
    fields = list(ent.table_entry.match)
    del ent.table_entry.match[:]
    ent.table_entry.match.extend(reversed(fields))   # a server may answer in any order
    assert entities.TableEntry.decode(ent, l2) == e


# A P4Info written here, shaped as p4c writes issue486-bmv2's: a key `z` beside a key `m.z`
# (whose last component is also `z`), and a register of int<W> cells.
SMALL = """
tables {
  preamble { id: 1 name: "ingress.t" alias: "t" }
  match_fields { id: 1 name: "m.z" bitwidth: 8 match_type: EXACT }
  match_fields { id: 2 name: "z" bitwidth: 8 match_type: EXACT }
  action_refs { id: 10 }
}
actions { preamble { id: 10 name: "ingress.a" alias: "a" } }
registers { preamble { id: 40 name: "ingress.cells" alias: "cells" }
            type_spec { bitstring { bit { bitwidth: 16 } } } size: 4 }
registers { preamble { id: 41 name: "ingress.signed" alias: "signed" }
            type_spec { bitstring { int { bitwidth: 16 } } } size: 4 }
meters { preamble { id: 30 name: "ingress.rate" alias: "rate" } spec { unit: BYTES } size: 2 }
"""


@pytest.fixture
def small(tmp_path: Path) -> Schema:
    p = tmp_path / "small.p4info.txtpb"
    p.write_text(SMALL)
    return Schema(load_p4info(p))


def test_a_key_named_exactly_wins_over_another_key_s_last_component(small: Schema) -> None:
    t = small.table("t")
    assert small.key_field(t, "z").id == 2
    assert small.key_field(t, "m.z").id == 1
    e = entities.TableEntry("ingress.t", (("z", Exact(7)), ("m.z", Exact(9))), "ingress.a")
    assert {m.field_id: m.exact.value for m in e.encode(small).table_entry.match} == \
        {2: b"\x07", 1: b"\x09"}


def test_suffix_lookups(small: Schema, l2: Schema) -> None:
    assert l2.table("ss.dmac", suffix=True).name == "L2Ingress.dmac"
    assert l2.table("Ingress.acl", suffix=True).name == "L2Ingress.acl"
    with pytest.raises(SchemaLookupError, match="no table named 'Ingress.ac'"):
        l2.table("Ingress.ac", suffix=True)
    assert small.register("ells", suffix=True).name == "ingress.cells"


def test_cells_round_trip_and_refusals(small: Schema) -> None:
    from netsum.p4rt.cells import MeterCell, RegisterCell
    r = RegisterCell("cells", 3, 0x1234)
    ent = r.encode(small)
    assert ent.register_entry.data.bitstring == b"\x12\x34"
    assert RegisterCell.decode(ent, small) == RegisterCell("ingress.cells", 3, 0x1234)
    with pytest.raises(LiteralError, match="does not fit in bit<16>"):
        RegisterCell("cells", 0, 1 << 16).encode(small)
    with pytest.raises(LiteralError, match="only bit<W> cells"):
        RegisterCell("signed", 0, 1).encode(small)
    m = MeterCell("rate", 1, (500, 10, 1000, 20))
    assert MeterCell.decode(m.encode(small), small) == MeterCell("ingress.rate", 1,
                                                                 (500, 10, 1000, 20))
    unset = MeterCell("rate", 0).encode(small)
    assert not unset.meter_entry.HasField("config")


def test_register_read_requests(small: Schema) -> None:
    """One cell (register id and index set) or the whole register (no index: a wildcard);
    an index past the register's size (4) is refused before anything is sent."""
    from netsum.p4rt.cells import register_wildcard
    one = register_wildcard(small, "cells", 3).register_entry
    assert (one.register_id, one.HasField("index"), one.index.index) == (40, True, 3)
    every = register_wildcard(small, "ingress.cells").register_entry
    assert (every.register_id, every.HasField("index")) == (40, False)
    with pytest.raises(LiteralError, match="register 'cells' index 4 is out of range 0..3"):
        register_wildcard(small, "cells", 4)


def test_pre_entities_keep_order_only_when_asked() -> None:
    from netsum.p4rt.pre import CloneSession
    reps = ((4, 200), (2, 100), (4, 100))
    ordered = MulticastGroup(5, reps, ordered=True)
    assert [(r.egress_port, r.instance) for r in ordered.encode()
            .packet_replication_engine_entry.multicast_group_entry.replicas] == list(reps)
    assert MulticastGroup(5, reps).replicas == tuple(sorted(reps))
    s = CloneSession(9, reps, class_of_service=2, packet_length_bytes=64)
    assert CloneSession.decode(s.encode()) == s
