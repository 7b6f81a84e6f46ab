"""Real p4c's JSON and P4Info (p4c-bm2-ss 1.2.5.16, tests/switch_p4/p4c/) of
tests/switch_p4/loops_unions.p4, run frame by frame: `for` loops with break/continue (p4c's
backward `_jump`), a header union made valid through its other member, a const LPM entry with
bits past its prefix, a const entry on a key slice, and a P4Runtime entry on a key over a
masked expression.  Made in tests/switch_p4/p4c/ with `p4c-bm2-ss --arch v1model -o
loops_unions.json --p4runtime-files loops_unions.p4info.txtpb ../loops_unions.p4`.  Expected
frames are worked out by hand from the P4 source (comments give the reasoning)."""
from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from netsum.switch.device import Device
from netsum.switch.errors import Code
from netsum.switch.p4rt.service import DeviceService

P4C = Path(__file__).resolve().parents[1] / "switch_p4" / "p4c"
BY_MASK, NOTE = 48334832, 21496391
PAYLOAD = b"\xee" * 6


def ctl(kind: int, n: int = 0, lo: int = 0, res: int = 0, tag: int = 0, addr: int = 0) -> bytes:
    return bytes([kind, n, lo, res]) + tag.to_bytes(2, "big") + addr.to_bytes(4, "big")


@pytest.fixture()
def dev() -> Device:
    d = Device()
    d.install(Device.build_pipeline((P4C / "loops_unions.json").read_bytes()))
    return d


@pytest.mark.parametrize("kind, n, lo, res", [
    (0x01, 10, 0, 55),          # sum_to_n: 1 + ... + 10
    (0x01, 0, 0, 0),            # i = 1 <= 0 fails at once
    (0x01, 23, 0, 20),          # 276 mod 256
    (0x02, 20, 1, 16),          # odd 1..7 (8 * 8 = 64 > 60 breaks): 1 + 3 + 5 + 7
    (0x02, 6, 4, 5),            # 4 even (continue), 5 odd, 6 < 6 ends
    (0x02, 3, 9, 0),            # lo >= n: no iteration
    (0x02, 30, 17, 17),         # 17 * 17 = 289 -> 33 in bit<8>: kept; 18 * 18 -> 68 breaks
])
def test_loops(dev: Device, kind: int, n: int, lo: int, res: int) -> None:
    # addr 192.168.0.1 matches no route: default port 1; tag 0 hits no note.
    pkt = ctl(kind, n, lo, 0, 0, 0xC0A80001) + PAYLOAD
    assert dev.process(0, pkt) == [(1, ctl(kind, n, lo, res, 0, 0xC0A80001) + PAYLOAD)]


def test_endless_loop_drops_the_packet_and_the_switch_goes_on(dev: Device) -> None:
    # i <= 255 holds for every bit<8> i: sum_to_n never ends for n = 255.
    assert dev.process(0, ctl(0x01, 255) + PAYLOAD) == []
    assert dev.stats.loop_limit == 1 and dev.stats.internal_errors == 0
    assert dev.process(0, ctl(0x01, 3) + PAYLOAD) == [(1, ctl(0x01, 3, 0, 6) + PAYLOAD)]


@pytest.mark.parametrize("addr, port", [
    (0x0A010203, 3),            # the entry as written
    (0x0AFF0000, 3),            # any 10.x.y.z: the bits past /8 are masked off
    (0x0A000001, 3),
    (0x0A0B0C0D, 4),            # 10.11/16 is the longer prefix
    (0x0B010203, 1),            # not in 10/8: default
])
def test_lpm_const_entry_is_masked_to_its_prefix(dev: Device, addr: int, port: int) -> None:
    pkt = ctl(0x00, addr=addr) + PAYLOAD
    assert dev.process(0, pkt) == [(port, pkt)]


def test_const_entry_on_a_key_slice(dev: Device) -> None:
    # tag[15:8] = 0x5a hits note(0x40); 0x5b does not (the low byte never matters).
    assert dev.process(0, ctl(0x00, tag=0x5A37) + PAYLOAD) == [(1, ctl(0x00, res=0x40, tag=0x5A37) + PAYLOAD)]
    assert dev.process(0, ctl(0x00, tag=0x5B5A) + PAYLOAD) == [(1, ctl(0x00, tag=0x5B5A) + PAYLOAD)]


def test_union_member_made_valid_invalidates_the_other(dev: Device) -> None:
    # kind 0xa5 extracts u.a; ingress makes u.b valid, which makes u.a invalid: kind becomes
    # 0xbb (u.a.isValid() is false) and only b (bbbb, tag) is emitted in a's place.
    pkt = ctl(0xA5, tag=0x1234) + b"\xde\xad\xbe\xef" + PAYLOAD
    assert dev.process(0, pkt) == [(1, ctl(0xBB, tag=0x1234) + b"\xbb\xbb\x12\x34" + PAYLOAD)]


def test_union_member_extracted_by_the_parser(dev: Device) -> None:
    # kind 0xb0 extracts u.b: z = y + z; kind 0xbb.  kind 0x40 extracts neither: unchanged.
    pkt = ctl(0xB0) + b"\x01\x02\x03\x04" + PAYLOAD
    assert dev.process(0, pkt) == [(1, ctl(0xBB) + b"\x01\x02\x04\x06" + PAYLOAD)]
    other = ctl(0x40) + b"\x01\x02\x03\x04" + PAYLOAD
    assert dev.process(0, other) == [(1, other)]


def test_p4runtime_entry_on_a_masked_key(dev: Device) -> None:
    # `hdr.ctl.tag & 0x00f0 : exact`: P4Info says 16 bits, the JSON names ctl.tag with mask
    # 0x00f0.  The entry's value 0x0030 matches every tag whose bits 7..4 are 0x3.
    info = text_format.Parse((P4C / "loops_unions.p4info.txtpb").read_text(), p4info_pb2.P4Info())
    svc = DeviceService(dev)
    svc.set_pipeline(pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                     pb.ForwardingPipelineConfig(
                         p4info=info, p4_device_config=(P4C / "loops_unions.json").read_bytes()))
    te = pb.TableEntry(table_id=BY_MASK)
    te.match.add(field_id=1).exact.value = b"\x00\x30"
    te.action.action.action_id = NOTE
    te.action.action.params.add(param_id=1, value=b"\x10")
    u = pb.Update(type=pb.Update.INSERT)
    u.entity.table_entry.CopyFrom(te)
    assert svc.write([u]) == [(Code.OK, "")]
    assert dev.process(0, ctl(0x00, tag=0x1234) + PAYLOAD) == [(1, ctl(0x00, res=0x10, tag=0x1234) + PAYLOAD)]
    assert dev.process(0, ctl(0x00, tag=0x1244) + PAYLOAD) == [(1, ctl(0x00, tag=0x1244) + PAYLOAD)]
    e = pb.Entity()
    e.table_entry.table_id = BY_MASK
    (got,) = [x.table_entry for x in svc.read([e])]
    assert got.match[0].exact.value == b"\x30"           # canonical: no leading zero bytes
