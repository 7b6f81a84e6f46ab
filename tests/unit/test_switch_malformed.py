"""Malformed input never crashes the device: it is counted, and other traffic is unaffected."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netsum.switch.device import MAX_FRAME, Device
from netsum.switch.entries import ActionCall, Lpm, TableEntry

JSON = Path(__file__).resolve().parents[1] / "switch_json" / "router.json"
GOOD = bytes(Ether() / IP(dst="10.0.0.1") / UDP() / (b"g" * 20))


@pytest.fixture
def dev() -> Device:
    d = Device()
    d.install(Device.build_pipeline(JSON.read_bytes()))
    d.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        (Lpm(0x0A000000, 8),), ActionCall("MyIngress.ipv4_forward", (1, 2))))
    return d


def assert_still_forwards(dev: Device) -> None:
    [(port, _)] = dev.process(1, GOOD)
    assert port == 2


def test_every_truncation_of_a_good_frame(dev: Device) -> None:
    for n in range(len(GOOD)):
        dev.process(1, GOOD[:n])
    # frames shorter than Ethernet (14) or than Ethernet+IPv4 (34) are truncated parses
    assert dev.stats.truncated == 34
    assert dev.stats.internal_errors == 0
    assert_still_forwards(dev)


def test_random_bytes(dev: Device) -> None:
    rnd = random.Random(7)
    for _ in range(500):
        n = rnd.choice([0, 1, 13, 14, 15, 33, 34, 60, 200, 1500])
        dev.process(rnd.randrange(512), bytes(rnd.getrandbits(8) for _ in range(n)))
    assert dev.stats.internal_errors == 0
    assert_still_forwards(dev)


@pytest.mark.parametrize("port", [-1, 512, 10**6])
def test_unknown_port_counted(dev: Device, port: int) -> None:
    assert dev.process(port, GOOD) == []
    assert dev.stats.unknown_port == 1
    assert_still_forwards(dev)


def test_jumbo_and_oversize(dev: Device) -> None:
    jumbo = bytes(Ether() / IP(dst="10.0.0.1") / UDP() / (b"j" * 9000))
    [(port, data)] = dev.process(1, jumbo)
    assert port == 2 and len(data) == len(jumbo)
    assert dev.process(1, b"\x00" * (MAX_FRAME + 1)) == []
    assert dev.stats.oversize == 1
    assert_still_forwards(dev)


def test_no_pipeline_counted() -> None:
    d = Device()
    assert d.process(1, GOOD) == []
    assert d.stats.no_pipeline == 1


def test_internal_error_costs_one_packet(dev: Device) -> None:
    # A pipeline bug (simulated by a failing action of the Python path) drops that packet
    # only.  (The native backend's own failures are covered in test_switch_native.)
    assert dev.pipeline is not None
    dev.pipeline.native = None
    dev._v1.native = None                     # type: ignore[union-attr]
    lpm = dev.pipeline.tables["MyIngress.ipv4_lpm"]

    def boom(F: list[int], P: tuple[int, ...], pkt: object) -> None:
        raise RuntimeError("bug")
    lpm._by_ident[next(iter(lpm._by_ident))].fn = boom
    assert dev.process(1, GOOD) == []
    assert dev.stats.internal_errors == 1
