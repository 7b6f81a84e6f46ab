"""Packet-level tests of the real p4c output for calc_state.p4 (_jump_if_zero/_jump, const
entries, registers, indirect counter, crc16 hash, random, parser verify, select with masks,
csum16 verify/update, hidden tables)."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netsum.switch.calculations import crc16
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, CounterValue, Exact, TableEntry
from netsum.switch.errors import OutOfRange, PermissionDenied

ETH_A = "02:00:00:00:00:0a"
ETH_B = "02:00:00:00:00:0b"
CALC = struct.Struct(">BIIIB")


def program_json(source: str, fixtures: Path) -> bytes:
    """BMv2 JSON of a fixture program: real p4c's output, or netsum's compiler's (round trip
    P4 -> netsum-p4c -> switch), so both toolchains are held to the same packet behaviour."""
    if source == "p4c":
        return (fixtures / "calc_state.json").read_bytes()
    from netsum import p4c as compiler
    result = compiler.compile_file(str(fixtures / "calc_state.p4"))
    return result.json_text().encode()


@pytest.fixture(params=["p4c", "netsum-p4c"])
def dev(request: pytest.FixtureRequest, p4c_fixtures: Path) -> Device:
    d = Device(seed=1)
    d.install(Device.build_pipeline(program_json(request.param, p4c_fixtures)))
    return d


def calc_frame(op: int, a: int, b: int) -> bytes:
    return bytes(Ether(dst=ETH_B, src=ETH_A, type=0x1234)) + CALC.pack(op, a, b, 0, 0x77)


def run_calc(dev: Device, op: int, a: int, b: int, port: int = 3) -> tuple[int, int, int]:
    [(out_port, data)] = dev.process(port, calc_frame(op, a, b))
    assert out_port == port                               # reply() bounces to ingress port
    eth = Ether(data[:14])
    assert (eth.dst, eth.src) == (ETH_A, ETH_B)           # addresses swapped
    _op, _a, _b, result, status = CALC.unpack(data[14:28])
    return result, status, len(data)


@pytest.mark.parametrize("op, a, b, result, status", [
    (0x2B, 5, 7, 12, 0),                       # op_add
    (0x2B, 0xFFFFFFFF, 2, 1, 0),               # op_add wraps at 32 bits
    (0x2D, 5, 7, (5 - 7) & 0xFFFFFFFF, 0),     # op_sub
    (0x2F, 9, 0, 0, 1),                        # op_div_like, then-branch (b == 0)
    (0x2F, 9, 3, 4, 0),                        # op_div_like, else-branch (a >> 1)
    (0x99, 1, 2, 0, 0xFF),                     # default action op_unknown
])
def test_calculator_ops(dev: Device, op: int, a: int, b: int, result: int, status: int) -> None:
    assert run_calc(dev, op, a, b)[:2] == (result, status)


def test_per_op_counter_counts_in_hidden_table(dev: Device) -> None:
    for op in (0x2B, 0x2B, 0x2D):
        run_calc(dev, op, 1, 1)
    c = dev.pipeline.counters["CalcIngress.per_op"]
    assert c.read(0x2B & 0xF).packets == 2 and c.read(0x2D & 0xF).packets == 1
    assert c.read(0x2B & 0xF).bytes == 2 * len(calc_frame(0, 0, 0))
    with pytest.raises(OutOfRange):
        c.read(16)


def test_accumulate_uses_register(dev: Device) -> None:
    pl = dev.pipeline
    calc_ops = pl.tables["CalcIngress.calc_ops"]
    # calc_ops has const entries: the table is const; but its default action is not.
    with pytest.raises(PermissionDenied):
        calc_ops.insert(TableEntry((Exact(0x2A),), ActionCall("CalcIngress.op_accumulate")))
    calc_ops.set_default(ActionCall("CalcIngress.op_accumulate"))
    assert run_calc(dev, 0x01, 10, 0x105)[0] == 10
    assert run_calc(dev, 0x01, 32, 0x205)[0] == 42        # same slot: 0x..05 & 0xff
    assert pl.registers["CalcIngress.acc"].read(5) == 42
    pl.registers["CalcIngress.acc"].write(5, 100)
    assert run_calc(dev, 0x01, 1, 5)[0] == 101


def test_const_entries_listed_with_priorities(dev: Device) -> None:
    t = dev.pipeline.tables["CalcIngress.calc_ops"]
    ents = t.entries()
    assert sorted(e.key[0].value for e in ents) == [0x2B, 0x2D, 0x2F]   # type: ignore
    assert all(e.is_const and e.priority == 0 for e in ents)
    assert t.is_const and not t.default_is_const


def ipv4_frame(ttl: int = 64, ihl: int = 5, proto: int = 17, frag: int = 0,
               bad_csum: bool = False) -> bytes:
    pkt = Ether(dst=ETH_B, src=ETH_A) / IP(src="10.0.0.1", dst="10.0.0.2", ttl=ttl,
                                          proto=proto, frag=frag)
    raw = bytearray(bytes(pkt / UDP(sport=1, dport=2) / (b"u" * 20)))
    if ihl != 5:
        raw[14] = 0x40 | ihl
    if bad_csum:
        raw[24] ^= 0xFF
    return bytes(raw)


def test_ipv4_ttl_decrement_checksum_and_hash_port(dev: Device) -> None:
    f = ipv4_frame(ttl=64)
    [(port, data)] = dev.process(1, f)
    ip = Ether(data)[IP]
    assert ip.ttl == 63
    csum = ip.chksum
    del ip.chksum
    assert IP(bytes(ip)).chksum == csum                    # update_checksum is right
    # egress port = crc16(eth.src ++ eth.dst ++ etype) & 3
    assert port == crc16(f[6:12] + f[0:6] + f[12:14]) & 3
    assert dev.stats.checksum_errors == 0


def test_bad_checksum_is_flagged_not_dropped(dev: Device) -> None:
    out = dev.process(1, ipv4_frame(bad_csum=True))
    assert len(out) == 1
    assert dev.stats.checksum_errors == 1


def test_ttl_one_dropped(dev: Device) -> None:
    assert dev.process(1, ipv4_frame(ttl=1)) == []
    assert dev.stats.dropped == 1


def test_parser_select_on_frag_and_proto_reaches_calc(dev: Device) -> None:
    base = ipv4_frame(proto=0xFD)
    f = base[:34] + CALC.pack(0x2B, 2, 3, 0, 0)
    [(port, data)] = dev.process(2, f)
    assert port == 2 and CALC.unpack(data[34:48])[3] == 5
    # a fragment (frag != 0) must not be parsed as calc
    f2 = ipv4_frame(proto=0xFD, frag=1)[:34] + CALC.pack(0x2B, 2, 3, 0, 0)
    [(_, data2)] = dev.process(2, f2)
    assert CALC.unpack(data2[34:48])[3] == 0


def test_parser_verify_sets_error_and_keeps_packet(dev: Device) -> None:
    out = dev.process(1, ipv4_frame(ihl=4))
    assert len(out) == 1 and dev.stats.parser_errors == 1


def test_truncated_calc_header(dev: Device) -> None:
    f = calc_frame(0x2B, 1, 2)[:20]
    out = dev.process(1, f)
    # calc not extracted -> invalid -> not IPv4 either -> dropped by the else branch
    assert out == [] and dev.stats.truncated == 1


def test_counter_write_and_read(dev: Device) -> None:
    c = dev.pipeline.counters["CalcIngress.per_op"]
    c.write(3, CounterValue(7, 700))
    assert c.read(3) == CounterValue(7, 700)
