"""Packet-level tests of the real p4c output for l2_mcast.p4 (exact/ternary/range keys, direct
counter, .miss with a hidden table, multicast with per-replica egress rewrite, I2E clone)."""
from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.l2 import Dot1Q, Ether

from netsum.switch.device import Device
from netsum.switch.entries import (ActionCall, CounterValue, Exact, Range, Replica, TableEntry,
                            Ternary)
from netsum.switch.errors import InvalidArgument

A = "00:00:00:00:00:0a"
B = "00:00:00:00:00:0b"


def mac(s: str) -> int:
    return int(s.replace(":", ""), 16)


def program_json(source: str, fixtures: Path) -> bytes:
    """BMv2 JSON of a fixture program: real p4c's output, or netsum's compiler's (round trip
    P4 -> netsum-p4c -> switch), so both toolchains are held to the same packet behaviour."""
    if source == "p4c":
        return (fixtures / "l2_mcast.json").read_bytes()
    from netsum import p4c as compiler
    result = compiler.compile_file(str(fixtures / "l2_mcast.p4"))
    return result.json_text().encode()


@pytest.fixture(params=["p4c", "netsum-p4c"])
def dev(request: pytest.FixtureRequest, p4c_fixtures: Path) -> Device:
    d = Device()
    d.install(Device.build_pipeline(program_json(request.param, p4c_fixtures)))
    return d


def frame(dst: str = B, src: str = A, vid: int | None = None) -> bytes:
    if vid is None:
        return bytes(Ether(dst=dst, src=src, type=0x0800) / (b"p" * 46))
    return bytes(Ether(dst=dst, src=src) / Dot1Q(vlan=vid, type=0x0800) / (b"p" * 46))


def test_known_dst_unicast_and_direct_counter(dev: Device) -> None:
    t = dev.pipeline.tables["L2Ingress.dmac"]
    t.insert(TableEntry((Exact(mac(B)),), ActionCall("L2Ingress.forward", (4,))))
    f = frame()
    out = dev.process(1, f)
    assert out == [(4, f)]
    dev.process(1, f)
    e = t.get((Exact(mac(B)),))
    assert e.counter == CounterValue(2, 2 * len(f))
    assert t.read_counter((Exact(mac(B)),)) == CounterValue(2, 2 * len(f))


def test_miss_floods_to_group_1_with_per_replica_rewrite(dev: Device) -> None:
    pl = dev.pipeline
    pl.pre.mc_group_insert(1, [Replica(1, 1), Replica(2, 2), Replica(3, 3)])
    rw = pl.tables["L2Egress.replica_rewrite"]
    rw.insert(TableEntry((Exact(2), Exact(2)), ActionCall("L2Egress.set_vlan", (100,))))
    out = dev.process(1, frame())
    # port 1 is the ingress port: the egress conditional drops replicas reflected to it
    assert [p for p, _ in out] == [2, 3]
    tagged = Ether(out[0][1])
    assert tagged.haslayer(Dot1Q) and tagged[Dot1Q].vlan == 100 and tagged[Dot1Q].type == 0x0800
    assert out[1][1] == frame()
    assert dev.stats.dropped == 1


def test_strip_vlan_on_replica(dev: Device) -> None:
    pl = dev.pipeline
    pl.pre.mc_group_insert(1, [Replica(5, 7)])
    pl.tables["L2Egress.replica_rewrite"].insert(
        TableEntry((Exact(7), Exact(5)), ActionCall("L2Egress.strip_vlan")))
    [(port, data)] = dev.process(1, frame(vid=42))
    assert port == 5
    assert data == frame()


def test_flood_action_sets_group(dev: Device) -> None:
    pl = dev.pipeline
    pl.tables["L2Ingress.dmac"].insert(
        TableEntry((Exact(mac(B)),), ActionCall("L2Ingress.flood", (9,))))
    pl.pre.mc_group_insert(9, [Replica(6, 0), Replica(7, 0)])
    assert [p for p, _ in dev.process(1, frame())] == [6, 7]


@pytest.mark.parametrize("src, vid, port, denied", [
    (A, None, 3, True),          # src matches, port in range
    (A, None, 9, False),         # port outside range 1..4
    (B, None, 3, False),         # src does not match
    (A, 10, 3, True),            # vlan vid is wildcarded
])
def test_acl_ternary_and_range(dev: Device, src: str, vid: int | None, port: int,
                               denied: bool) -> None:
    pl = dev.pipeline
    pl.tables["L2Ingress.dmac"].insert(
        TableEntry((Exact(mac(B)),), ActionCall("L2Ingress.forward", (8,))))
    pl.tables["L2Ingress.acl"].insert(TableEntry(
        (Ternary(mac(A), 0xFFFFFFFFFFFF), Ternary(0, 0), Range(1, 4)),
        ActionCall("L2Ingress.deny"), priority=10))
    out = dev.process(port, frame(src=src, vid=vid))
    assert (out == []) == denied


def test_acl_priority_larger_wins_and_clone(dev: Device) -> None:
    pl = dev.pipeline
    pl.tables["L2Ingress.dmac"].insert(
        TableEntry((Exact(mac(B)),), ActionCall("L2Ingress.forward", (8,))))
    acl = pl.tables["L2Ingress.acl"]
    anyk = (Ternary(0, 0), Ternary(0, 0), Range(0, 511))
    acl.insert(TableEntry(anyk, ActionCall("L2Ingress.deny"), priority=1))
    acl.insert(TableEntry(anyk, ActionCall("L2Ingress.to_cpu_copy", (5,)), priority=2))
    pl.pre.clone_session_insert(5, [Replica(64, 0)], packet_length_bytes=20)
    out = dev.process(1, frame())
    # the clone goes first (end-of-ingress order), truncated; the original is unicast
    assert out == [(64, frame()[:20]), (8, frame())]
    acl.delete(anyk, 2)
    assert dev.process(1, frame()) == []


def test_table_rules(dev: Device) -> None:
    pl = dev.pipeline
    acl = pl.tables["L2Ingress.acl"]
    assert acl.needs_priority and not pl.tables["L2Ingress.dmac"].needs_priority
    assert pl.tables["tbl_l2_mcast46"].hidden and pl.tables["tbl_l2_mcast46"].default_is_const
    assert pl.tables["L2Ingress.dmac"].direct_counter == "L2Ingress.dmac_hits"
    with pytest.raises(InvalidArgument):
        acl.insert(TableEntry((Ternary(0, 0), Ternary(0, 0), Range(0, 511)),
                              ActionCall("L2Ingress.deny"), priority=0))
    with pytest.raises(InvalidArgument):   # vid is bit<12>
        acl.insert(TableEntry((Ternary(0, 0), Ternary(0x1000, 0x1000), Range(0, 511)),
                              ActionCall("L2Ingress.deny"), priority=1))
