"""P4Info index over real p4c output: names, aliases, suggestions, entity encode/decode."""
from __future__ import annotations

from pathlib import Path

import pytest

from netsum.controller import entities
from netsum.controller.errors import ControllerError, LiteralError, SchemaLookupError
from netsum.controller.schema import Schema, load_p4info
from netsum.controller.values import Exact, Range, Ternary


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
    g = entities.MulticastGroup(5, ((1, 1), (2, 2)))
    assert entities.MulticastGroup.decode(g.encode()) == g


@pytest.mark.parametrize("text, fragment", [
    ("tables { preamble { id: 1 ", "does not parse"),
    ("pkg_info { arch: \"v1model\" }", "declares no tables or actions"),
])
def test_load_p4info_errors(tmp_path: Path, text: str, fragment: str) -> None:
    p = tmp_path / "x.p4info.txtpb"
    p.write_text(text)
    with pytest.raises(ControllerError, match=fragment):
        load_p4info(p)
    with pytest.raises(ControllerError, match="cannot read"):
        load_p4info(tmp_path / "missing.txt")


def test_multicast_replica_order_does_not_matter() -> None:
    # PI reads replicas back grouped by rid, not in the order they were written.
    assert entities.MulticastGroup(3, ((5, 2), (1, 1), (4, 2))) == \
        entities.MulticastGroup(3, ((1, 1), (4, 2), (5, 2)))


def test_decoded_match_is_in_key_order(l2: Schema) -> None:
    e = entities.parse_table_entry(l2, "acl", "deny", ["1&&&1", "5&&&0xfff", "1->4"], [], "3")
    ent = e.encode(l2)
    fields = list(ent.table_entry.match)
    del ent.table_entry.match[:]
    ent.table_entry.match.extend(reversed(fields))   # a server may answer in any order
    assert entities.TableEntry.decode(ent, l2) == e
