"""Egress queues as simple_switch's: per-port depth and rate, enq_qdepth / deq metadata, tail
drop, and an ECN-marking program (tests/switch_p4/ecn.p4, compiled by netsum-p4c) that marks
CE only when its port is set slower than the offered load.  Time is a fake clock, so the
expectations are exact: at rate R a queue releases one packet per 1/R s, and the n-th packet
of a burst finds n packets ahead of it."""
from __future__ import annotations

from pathlib import Path

import pytest

from netsum import p4c as compiler
from p4helpers import ipv4_checksum_ok
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Lpm, TableEntry

ECN_P4 = Path(__file__).resolve().parents[1] / "switch_p4" / "ecn.p4"
THRESHOLD = 10          # ECN_THRESHOLD in ecn.p4


class Clock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> None:
        self.ns += int(seconds * 1e9)


@pytest.fixture(scope="module")
def ecn_json() -> str:
    return compiler.compile_source(ECN_P4.read_text()).json_text()


def device(ecn_json: str) -> tuple[Device, Clock]:
    clock = Clock()
    dev = Device(clock=clock)
    dev.install(Device.build_pipeline(ecn_json))
    dev.pipeline.tables["EcnIngress.ipv4_fwd"].insert(    # type: ignore[union-attr]
        TableEntry((Lpm(0x0A000000, 8),), ActionCall("EcnIngress.forward", (2,))))
    return dev, clock


def ipv4_frame(seq: int, ecn: int = 1) -> bytes:
    ip = bytearray(20)
    ip[0] = 0x45
    ip[1] = ecn
    ip[2:4] = (20 + 8).to_bytes(2, "big")
    ip[4:6] = seq.to_bytes(2, "big")
    ip[8], ip[9] = 64, 17
    ip[12:16] = bytes([10, 0, 0, 1])
    ip[16:20] = bytes([10, 0, 0, 2])
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + bytes(ip) + b"payload!"


def ecn_of(frame: bytes) -> int:
    return frame[15] & 3


def test_no_rate_means_no_queue(ecn_json: str) -> None:
    dev, _ = device(ecn_json)
    outs = [dev.process(1, ipv4_frame(i)) for i in range(30)]
    assert all(len(o) == 1 and ecn_of(o[0][1]) == 1 for o in outs)
    assert dev.next_deadline() is None and dev.poll() == []


def test_port_slower_than_the_offered_load_marks_ce(ecn_json: str) -> None:
    dev, clock = device(ecn_json)
    dev.set_queue_rate(100, port=2)                 # 10 ms per packet
    assert dev.process(1, ipv4_frame(0)) == []       # queued, leaves at once
    burst = [dev.process(1, ipv4_frame(i)) for i in range(1, 40)]
    assert all(o == [] for o in burst)
    first = dev.poll()
    assert [ecn_of(f) for _, f in first] == [1]
    clock.advance(0.025)                             # 2 more departures are due
    assert len(dev.poll()) == 2
    clock.advance(1.0)
    rest = dev.poll()
    outs = first + [(2, b"")] * 2 + rest
    assert len(outs) == 40 and all(p == 2 for p, _ in outs)
    marks = [ecn_of(f) for _, f in rest]
    # Packet n found n packets queued: n >= THRESHOLD is marked CE (ECT(1) -> 3).
    assert marks == [1] * (THRESHOLD - 3) + [3] * (40 - THRESHOLD)
    assert all(ipv4_checksum_ok(f[14:34]) for _, f in rest)
    assert dev.next_deadline() is None


def test_port_faster_than_the_offered_load_does_not_mark(ecn_json: str) -> None:
    dev, clock = device(ecn_json)
    dev.set_queue_rate(1000, port=2)                # 1 ms per packet, offered 1 per 2 ms
    got = []
    for i in range(50):
        dev.process(1, ipv4_frame(i))
        clock.advance(0.002)
        got += dev.poll()
    assert len(got) == 50 and {ecn_of(f) for _, f in got} == {1}


def test_non_ect_packets_are_never_marked(ecn_json: str) -> None:
    dev, clock = device(ecn_json)
    dev.set_queue_rate(10)                          # every port
    for i in range(30):
        dev.process(1, ipv4_frame(i, ecn=0))
    clock.advance(5)
    got = dev.poll()
    assert len(got) == 30 and {ecn_of(f) for _, f in got} == {0}


def test_full_queue_drops_the_tail(ecn_json: str) -> None:
    dev, clock = device(ecn_json)
    dev.set_queue_depth(16, port=2)
    dev.set_queue_rate(50, port=2)
    for i in range(40):
        dev.process(1, ipv4_frame(i))
    assert dev.stats.queue_drops == 40 - 16
    clock.advance(10)
    seqs = [int.from_bytes(f[18:20], "big") for _, f in dev.poll()]
    assert seqs == list(range(16))                  # FIFO, the first 16 kept


def test_rate_zero_turns_the_queue_off_once_empty(ecn_json: str) -> None:
    dev, clock = device(ecn_json)
    dev.set_queue_rate(100, port=2)
    dev.process(1, ipv4_frame(0))
    dev.process(1, ipv4_frame(1))
    dev.set_queue_rate(0, port=2)
    assert len(dev.process(1, ipv4_frame(2))) == 1   # not limited any more: direct
    clock.advance(1)
    assert len(dev.poll()) == 2                      # what waited still leaves
    assert dev.next_deadline() is None


@pytest.mark.parametrize("call", [lambda d: d.set_queue_depth(0), lambda d: d.set_queue_rate(-1),
                                  lambda d: d.set_queue_rate(5, port=512)])
def test_bad_settings_are_value_errors(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        call(Device())
