"""netsum-p4c's outputs on the embedded switch: every golden JSON loads, and the header-stack
programs (tests/p4programs/stack.p4, tutorial_mix.p4) behave as their P4 source says, frame in,
frames out — MPLS-style labels parsed to bottom-of-stack through `stack_field` transition keys,
popped and pushed; source routing that pops a hop; a bloom filter and ECMP hashed with the
v1model algorithms."""
from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from scapy.contrib.mpls import MPLS
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from switch.device import Device
from switch.entries import ActionCall, Exact, Lpm, TableEntry
from switch.pipeline import Pipeline

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
ALL_JSON = sorted((GOLDEN / "compiler").glob("*.json")) + sorted((GOLDEN / "p4").glob("*.json"))
PAYLOAD = b"payload-bytes-0123456789"


def load(name: str, fuse: bool = True) -> Device:
    d = Device()
    d.install(Pipeline(json.loads((GOLDEN / "compiler" / f"{name}.json").read_text()), fuse=fuse))
    return d


def test_golden_set_is_complete() -> None:
    names = {p.stem for p in ALL_JSON}
    assert {"stack", "tutorial_mix", "grab_bag", "netsum"} <= names and len(names) >= 12


@pytest.mark.parametrize("path", ALL_JSON, ids=lambda p: f"{p.parent.name}/{p.stem}")
@pytest.mark.parametrize("fuse", [True, False])
def test_every_golden_json_loads_and_runs(path: Path, fuse: bool) -> None:
    dev = Device()
    dev.install(Pipeline(json.loads(path.read_text()), fuse=fuse))
    # an arbitrary frame goes through the whole life cycle without an internal error
    frame = bytes(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02") /
                  IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=2) / PAYLOAD)
    dev.process(1, frame)
    dev.process(1, b"\x00" * 3)
    assert dev.stats.as_dict().get("internal_errors", 0) == 0


# ---------------------------------------------------------------- stack.p4 (MPLS labels)

ETH = Ether(dst="02:00:00:00:00:0a", src="02:00:00:00:00:0b", type=0x8847)


def labels(*specs: tuple[int, int]) -> bytes:
    """(label, bos) pairs -> the label stack's bytes (tc 0, ttl 9)."""
    return b"".join(bytes(MPLS(label=lab, cos=0, s=bos, ttl=9)) for lab, bos in specs)


def mpls(*specs: tuple[int, int]) -> bytes:
    return bytes(ETH) + labels(*specs) + PAYLOAD


@pytest.fixture(params=[True, False], ids=["fused", "reference"])
def stk(request: pytest.FixtureRequest) -> Device:
    d = load("stack", fuse=request.param)
    t = d.pipeline.tables["StkIngress.lfib"]
    t.insert(TableEntry((Exact(100),), ActionCall("StkIngress.pop", (3,))))
    t.insert(TableEntry((Exact(200),), ActionCall("StkIngress.push", (777, 4))))
    return d


@pytest.mark.parametrize("frame, port, out", [
    # pop: the top label goes, the rest of the stack and the payload follow unchanged
    (mpls((100, 0), (55, 1)), 3, mpls((55, 1))),
    (mpls((100, 0), (56, 0), (57, 1)), 3, mpls((56, 0), (57, 1))),
    # popping the only label leaves an empty stack
    (mpls((100, 1)), 3, mpls()),
    # bos on the first label stops the parser: the second "label" is payload, kept as is
    (mpls((100, 1), (66, 1)), 3, bytes(ETH) + labels((66, 1)) + PAYLOAD),
    # push: a new top label (ttl 64, bos 0), the old ones shifted down
    (mpls((200, 1)), 4, bytes(ETH) + bytes(MPLS(label=777, s=0, ttl=64)) + labels((200, 1))
     + PAYLOAD),
    # push onto a full stack (3 parsed labels): the bottom one falls off
    (mpls((200, 0), (5, 0), (6, 1)), 4,
     bytes(ETH) + bytes(MPLS(label=777, s=0, ttl=64)) + labels((200, 0), (5, 0)) + PAYLOAD),
    # more labels than the stack holds: parser error StackOutOfBounds, the packet goes on
    # with three labels parsed; the fourth is unparsed payload, emitted after them
    (mpls((100, 0), (2, 0), (3, 0), (4, 1)), 3, mpls((2, 0), (3, 0), (4, 1))),
    # unknown label: NoAction, egress_spec stays 0, frame unchanged
    (mpls((999, 1)), 0, mpls((999, 1))),
])
def test_stack_labels(stk: Device, frame: bytes, port: int, out: bytes) -> None:
    assert stk.process(1, frame) == [(port, out)]


def test_stack_out_of_bounds_sets_parser_error(stk: Device) -> None:
    stk.process(1, mpls((100, 0), (2, 0), (3, 0), (4, 1)))
    stk.process(1, mpls((100, 0), (2, 1)))
    assert stk.stats.as_dict()["parser_errors"] == 1


def test_stack_non_mpls_frame_is_untouched(stk: Device) -> None:
    f = bytes(Ether(type=0x0800) / IP(dst="10.0.0.1") / PAYLOAD)
    assert stk.process(2, f) == [(0, f)]


# ------------------------------------------------- tutorial_mix.p4 (source routing, hashes)

def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC, v1model's HashAlgorithm.crc16 (reflected poly 0x8005, init 0)."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def hops(*specs: tuple[int, int]) -> bytes:
    """(bos, port) pairs -> srcRoute_t bytes (bit<1> bos, bit<15> port)."""
    return b"".join(((bos << 15) | port).to_bytes(2, "big") for bos, port in specs)


IP_TCP = bytes(IP(src="10.0.1.1", dst="10.0.2.2", proto=6) / TCP(sport=1234, dport=80,
                                                                  flags="S") / PAYLOAD)
SR_ETH = bytes(Ether(dst="02:00:00:00:00:0a", src="02:00:00:00:00:0b", type=0x1234))


@pytest.fixture(params=[True, False], ids=["fused", "reference"])
def mix(request: pytest.FixtureRequest) -> Device:
    return load("tutorial_mix", fuse=request.param)


@pytest.mark.parametrize("route, port, rest", [
    ([(0, 2), (0, 3), (1, 5)], 2, [(0, 3), (1, 5)]),
    ([(1, 7)], 7, []),
    ([(0, 0x1fe), (1, 1)], 0x1fe, [(1, 1)]),
    ([(0, 0x7ffe), (1, 1)], 0x1fe, [(1, 1)]),     # (bit<9>) cast keeps the low 9 bits
    ([(0, 0x1ff), (1, 1)], None, []),             # 511 is simple_switch's drop port
    # 5 hops, no bos within 4: StackOutOfBounds; 4 parsed hops, the 5th is payload
    ([(0, 1), (0, 2), (0, 3), (0, 4), (1, 6)], 1, [(0, 2), (0, 3), (0, 4), (1, 6)]),
])
def test_source_routing_pops_a_hop(mix: Device, route: list[tuple[int, int]],
                                   port: int | None, rest: list[tuple[int, int]]) -> None:
    out = mix.process(1, SR_ETH + hops(*route) + IP_TCP)
    assert out == ([] if port is None else [(port, SR_ETH + hops(*rest) + IP_TCP)])


def _ecmp(dev: Device, base: int, count: int, ports: dict[int, int]) -> None:
    pl = dev.pipeline
    pl.tables["MixIngress.ecmp_group"].insert(TableEntry(
        (Lpm(0x0A000200, 24),), ActionCall("MixIngress.set_ecmp_select", (base, count))))
    for sel, port in ports.items():
        pl.tables["MixIngress.ecmp_nhop"].insert(TableEntry(
            (Exact(sel),), ActionCall("MixIngress.set_nhop", (port,))))


def test_ecmp_hash_selects_next_hop(mix: Device) -> None:
    eth = bytes(Ether(dst="02:00:00:00:00:0a", src="02:00:00:00:00:0b", type=0x0800))
    _ecmp(mix, 100, 8, {100 + k: 10 + k for k in range(8)})
    key = bytes([10, 0, 1, 1, 10, 0, 2, 2, 6]) + (1234).to_bytes(2, "big") + \
        (80).to_bytes(2, "big")            # srcAddr, dstAddr, protocol, srcPort, dstPort
    expect = 10 + crc16_arc(key) % 8
    assert mix.process(1, eth + IP_TCP) == [(expect, eth + IP_TCP)]
    # no route: ecmp_group's default drop()
    other = bytes(IP(src="10.0.1.1", dst="10.9.9.9", proto=6) / TCP() / PAYLOAD)
    assert mix.process(1, eth + other) == []


def test_bloom_filter_marks_flow(mix: Device) -> None:
    eth = bytes(Ether(dst="02:00:00:00:00:0a", src="02:00:00:00:00:0b", type=0x0800))
    _ecmp(mix, 0, 1, {0: 3})
    regs = mix.pipeline.registers
    flow = bytes([10, 0, 1, 1, 10, 0, 2, 2]) + (1234).to_bytes(2, "big") + \
        (80).to_bytes(2, "big") + bytes([6])   # ipAddr1, ipAddr2, port1, port2, protocol
    for _ in range(2):                       # a second packet of the flow changes nothing
        assert mix.process(1, eth + IP_TCP) == [(3, eth + IP_TCP)]
        b1, b2 = regs["MixIngress.bloom_1"].values, regs["MixIngress.bloom_2"].values
        assert [i for i, v in enumerate(b1) if v] == [crc16_arc(flow) % 4096]
        assert [i for i, v in enumerate(b2) if v] == [zlib.crc32(flow) % 4096]
    # UDP is not hashed into the filter
    udp = bytes(IP(src="10.0.1.9", dst="10.0.2.2") / UDP(sport=9, dport=9) / PAYLOAD)
    assert mix.process(1, eth + udp) == [(3, eth + udp)]
    assert sum(regs["MixIngress.bloom_1"].values) == 1
