"""Real p4c's JSON (p4c-bm2-ss 1.2.5.16, tests/switch_p4/p4c/) of two programs of ours,
tests/switch_p4/varbit.p4 and stacks.p4, run frame by frame.  Made in tests/switch_p4/p4c/ with
`p4c-bm2-ss --arch v1model -o NAME.json --p4runtime-files NAME.p4info.txtpb ../NAME.p4`.  Expected frames are worked out
by hand from the P4 source (comments give the reasoning); the checksum is recomputed by a
word-by-word one's complement sum written here."""
from __future__ import annotations

from pathlib import Path

import pytest

from netsum.switch.device import Device

P4C = Path(__file__).resolve().parents[1] / "switch_p4" / "p4c"


def device(name: str) -> Device:
    dev = Device()
    dev.install(Device.build_pipeline((P4C / f"{name}.json").read_bytes()))
    return dev


def csum16(data: bytes) -> bytes:
    data += b"\x00" * (len(data) % 2)
    total = 0
    for i in range(0, len(data), 2):
        total += data[i] << 8 | data[i + 1]
        total = (total & 0xFFFF) + (total >> 16)
    return (~total & 0xFFFF).to_bytes(2, "big")


@pytest.fixture(scope="module")
def varbit() -> Device:
    return device("varbit")


def test_varbit_swap_compare_and_checksum_with_payload(varbit: Device) -> None:
    # len: n1=2 n2=1; o1 = kind 11, data aabb (16 bits); o2 = kind 22, data cc (8 bits).
    # The swap moves the widths with the values: o1 = 11 cc, o2 = 22 aabb.  ck covers
    # o1.kind, o1.data, o2.data and then the payload.
    pkt = bytes.fromhex("02010000" "11aabb" "22cc" "0000" "dead")
    ck = csum16(bytes.fromhex("11" "cc" "aabb" "dead"))
    assert varbit.process(0, pkt) == [(1, bytes.fromhex("02010000" "11cc" "22aabb") + ck +
                                       bytes.fromhex("dead"))]
    # equal data: len.same = 1, the swap changes nothing
    pkt = bytes.fromhex("01010000" "115a" "225a" "0000")
    ck = csum16(bytes.fromhex("11" "5a" "5a"))
    assert varbit.process(0, pkt) == [(1, bytes.fromhex("01010001" "115a" "225a") + ck)]


@pytest.mark.parametrize("pkt, err", [
    # n1 = 5: 1 + 5 bytes > max_length 5 (bit<8> + varbit<32>): HeaderTooShort
    (bytes.fromhex("05000000" "1101020304050607"), 4),
    # n1 = 4, but only 3 bytes follow: PacketTooShort
    (bytes.fromhex("04000000" "110102"), 1),
])
def test_varbit_parser_errors(varbit: Device, pkt: bytes, err: int) -> None:
    # Only len is valid; o1.data == o2.data (both empty) so same = 1; the rest of the frame
    # follows unparsed.
    assert varbit.process(0, pkt) == [(1, pkt[:2] + bytes([err, 1]) + pkt[4:])]


@pytest.fixture(scope="module")
def stacks() -> Device:
    return device("stacks")


@pytest.mark.parametrize("pkt, out", [
    # i=0 j=2 t=0: hs[0] += 0x10, hs[2] becomes valid (zeroed), v = hs[0].isValid()
    ("00020000" "0102" "05" "07", "00020100" "110200" "05" "07"),
    # u.last.byte.d == 1 selects a short for u[1]; t=1 writes u[1].short
    ("01010001" "0102" "01" "0002", "01010101" "0112" "01" "beef"),
    # i=2: hs[2] is invalid (written, not emitted), v = 0; t=1 makes u[1].short valid, which
    # invalidates u[1].byte
    ("02000001" "0102" "05" "07", "02000001" "0102" "05" "beef"),
    # i=7 j=9 are outside hs: nothing changes, v = 0; t=2 pops u: u[0] = old u[1]
    ("07090002" "0102" "01" "0002", "07090002" "0102" "0002"),
])
def test_run_time_indices_and_union_stack(stacks: Device, pkt: str, out: str) -> None:
    assert stacks.process(0, bytes.fromhex(pkt)) == [(1, bytes.fromhex(out))]
