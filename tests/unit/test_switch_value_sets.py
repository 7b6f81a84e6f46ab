"""Parser value sets: real p4c's JSON and P4Info (p4c-bm2-ss 1.2.5.16) of
tests/switch_p4/value_sets.p4, made in tests/switch_p4/p4c/ with `p4c-bm2-ss --arch v1model -o
value_sets.json --p4runtime-files value_sets.p4info.txtpb ../value_sets.p4`, driven through the
P4Runtime service (ValueSetEntry, spec §9.8) with packets through the switch.  Expected
forwarding is read off the P4 source: a frame whose h.t is in `one`, equals 0x5555, or whose
(h.t, h.x) is in `two` has g extracted, goes to port 2 with h.x = g.y; any other to port 1."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from netsum.switch.device import Device
from netsum.switch.errors import Code, ConfigError
from netsum.switch.p4rt.service import DeviceService

P4C = Path(__file__).resolve().parents[1] / "switch_p4" / "p4c"
ONE, TWO = 56408685, 53550128
Cfg = pb.SetForwardingPipelineConfigRequest


def service(doc: dict[str, Any] | None = None) -> tuple[DeviceService, Device]:
    info = text_format.Parse((P4C / "value_sets.p4info.txtpb").read_text(), p4info_pb2.P4Info())
    raw = (P4C / "value_sets.json").read_bytes() if doc is None else json.dumps(doc).encode()
    dev = Device()
    svc = DeviceService(dev)
    svc.set_pipeline(Cfg.VERIFY_AND_COMMIT, pb.ForwardingPipelineConfig(
        p4info=info, p4_device_config=raw))
    return svc, dev


def vset(vs_id: int, *members: tuple[bytes, ...]) -> pb.ValueSetEntry:
    e = pb.ValueSetEntry(value_set_id=vs_id)
    for values in members:
        m = e.members.add()
        for fid, v in enumerate(values, 1):
            m.match.add(field_id=fid).exact.value = v
    return e


def write(svc: DeviceService, e: pb.ValueSetEntry, kind: int = pb.Update.MODIFY
          ) -> tuple[Code, str]:
    u = pb.Update(type=kind)
    u.entity.value_set_entry.CopyFrom(e)
    (res,) = svc.write([u])
    return res


def read(svc: DeviceService, vs_id: int = 0) -> list[pb.ValueSetEntry]:
    e = pb.Entity()
    e.value_set_entry.value_set_id = vs_id
    return [x.value_set_entry for x in svc.read([e])]


def frame(t: int, x: int, y: int = 0x99) -> bytes:
    return t.to_bytes(2, "big") + bytes([x, y]) + b"tail"


def fwd(dev: Device, t: int, x: int) -> tuple[int, bytes]:
    (out,) = dev.process(0, frame(t, x))
    return out


def test_members_select_the_parse_path() -> None:
    svc, dev = service()
    assert fwd(dev, 0x1234, 0x01) == (1, frame(0x1234, 0x01))        # empty sets: no g
    assert fwd(dev, 0x5555, 0x01) == (2, frame(0x5555, 0x99))        # the constant case
    assert write(svc, vset(ONE, (b"\x12\x34",), (b"\x00\x07",))) == (Code.OK, "")
    assert fwd(dev, 0x1234, 0x01) == (2, frame(0x1234, 0x99))
    assert fwd(dev, 0x0007, 0x01) == (2, frame(0x0007, 0x99))
    assert fwd(dev, 0x1235, 0x01) == (1, frame(0x1235, 0x01))
    # A pair set: both fields must match.
    assert write(svc, vset(TWO, (b"\xab\xcd", b"\x05"))) == (Code.OK, "")
    assert fwd(dev, 0xABCD, 0x05) == (2, frame(0xABCD, 0x99))
    assert fwd(dev, 0xABCD, 0x06) == (1, frame(0xABCD, 0x06))
    assert fwd(dev, 0xABCC, 0x05) == (1, frame(0xABCC, 0x05))
    # MODIFY replaces the members.
    assert write(svc, vset(ONE, (b"\x00\x08",))) == (Code.OK, "")
    assert fwd(dev, 0x1234, 0x01) == (1, frame(0x1234, 0x01))
    assert fwd(dev, 0x0008, 0x01) == (2, frame(0x0008, 0x99))
    assert write(svc, vset(ONE)) == (Code.OK, "")
    assert fwd(dev, 0x0008, 0x01) == (1, frame(0x0008, 0x01))


def test_read_back_members() -> None:
    svc, _ = service()
    write(svc, vset(ONE, (b"\x00\x12\x34",), (b"\x07",), (b"\x07",)))   # padded, repeated
    write(svc, vset(TWO, (b"\xab\xcd", b"\x05")))
    got = read(svc)
    assert [e.value_set_id for e in got] == sorted([ONE, TWO])
    by_id = {e.value_set_id: e for e in got}
    assert by_id[ONE] == vset(ONE, (b"\x12\x34",), (b"\x07",))           # canonical, once
    assert by_id[TWO] == vset(TWO, (b"\xab\xcd", b"\x05"))
    assert read(svc, TWO) == [by_id[TWO]]


@pytest.mark.parametrize("kind, entry, code, words", [
    (pb.Update.INSERT, vset(ONE, (b"\x01",)), Code.INVALID_ARGUMENT, "only MODIFY"),
    (pb.Update.DELETE, vset(ONE), Code.INVALID_ARGUMENT, "only MODIFY"),
    (pb.Update.MODIFY, vset(ONE, *[(bytes([i]),) for i in range(5)]), Code.RESOURCE_EXHAUSTED,
     "at most 4"),
    (pb.Update.MODIFY, vset(ONE, (b"\x01\x00\x00",)), Code.INVALID_ARGUMENT, "16 bits"),
    (pb.Update.MODIFY, vset(TWO, (b"\x01",)), Code.INVALID_ARGUMENT, "missing"),
    (pb.Update.MODIFY, vset(ONE, (b"\x01", b"\x02")), Code.INVALID_ARGUMENT, "unknown match field"),
    (pb.Update.MODIFY, vset(12345), Code.INVALID_ARGUMENT, "Invalid value set id"),
])
def test_bad_writes_change_nothing(kind: int, entry: pb.ValueSetEntry, code: Code,
                                   words: str) -> None:
    svc, dev = service()
    write(svc, vset(ONE, (b"\x12\x34",)))
    got_code, msg = write(svc, entry, kind)
    assert got_code == code and words in msg, msg
    assert fwd(dev, 0x1234, 0x01)[0] == 2
    assert read(svc, ONE) == [vset(ONE, (b"\x12\x34",))]


def test_ternary_member_is_unimplemented() -> None:
    svc, _ = service()
    e = pb.ValueSetEntry(value_set_id=ONE)
    m = e.members.add().match.add(field_id=1)
    m.ternary.value, m.ternary.mask = b"\x12\x00", b"\xff\x00"
    code, msg = write(svc, e)
    assert code == Code.UNIMPLEMENTED and "exact" in msg


def test_masked_transition_masks_key_and_members() -> None:
    # P4_14 value sets can carry a mask on the transition (p4c writes `mask` there): the key
    # and each member are compared under it, as bmv2 does.
    doc = json.loads((P4C / "value_sets.json").read_text())
    start = doc["parsers"][0]["parse_states"][0]
    tr = next(t for t in start["transitions"] if t["type"] == "parse_vset")
    tr["mask"] = "0xff00"
    svc, dev = service(doc)
    write(svc, vset(ONE, (b"\x12\x77",)))
    assert fwd(dev, 0x1200, 0x01)[0] == 2 and fwd(dev, 0x12FF, 0x01)[0] == 2
    assert fwd(dev, 0x1300, 0x01)[0] == 1


def test_reconcile_keeps_members() -> None:
    svc, dev = service()
    write(svc, vset(ONE, (b"\x12\x34",)))
    info = text_format.Parse((P4C / "value_sets.p4info.txtpb").read_text(), p4info_pb2.P4Info())
    svc.set_pipeline(Cfg.RECONCILE_AND_COMMIT, pb.ForwardingPipelineConfig(
        p4info=info, p4_device_config=(P4C / "value_sets.json").read_bytes()))
    assert fwd(dev, 0x1234, 0x01)[0] == 2
    svc.set_pipeline(Cfg.VERIFY_AND_COMMIT, pb.ForwardingPipelineConfig(
        p4info=info, p4_device_config=(P4C / "value_sets.json").read_bytes()))
    assert fwd(dev, 0x1234, 0x01)[0] == 1


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["parse_vsets"][0].update(compressed_bitwidth=8), "compressed_bitwidth 8"),
    (lambda d: d["parse_vsets"][0].update(max_size=-1), "bad max_size"),
    (lambda d: d["parse_vsets"].pop(0), "unknown value set 'P.one'"),
])
def test_bad_value_sets_in_the_json(edit: Any, words: str) -> None:
    doc = json.loads((P4C / "value_sets.json").read_text())
    edit(doc)
    with pytest.raises(ConfigError) as err:
        Device.build_pipeline(json.dumps(doc))
    assert words in str(err.value) and "parse" in str(err.value)
