"""P4Info <-> BMv2 JSON binding as PI does it (checked per request, not at config time), the
reset of a default entry, and keys on masked/sliced expressions, over the P4Runtime service
(no gRPC) with packets through the switch.  Pipeline: real p4c output of l2_mcast.p4, edited
where a case needs a JSON real p4c would emit for another program (each edit says what)."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from netsum.switch.device import Device
from netsum.switch.errors import Code
from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.p4rt.service import DeviceService

INSERT, MODIFY, DELETE = pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE
DMAC, ACL, REWRITE = 36472220, 43605182, 38207029
FORWARD, NOACTION, DENY, SET_VLAN = 25122418, 21257015, 28235802, 23871574
Edit = Callable[[p4info_pb2.P4Info, dict[str, Any]], None]


def service(fixtures: Path, edit: Edit | None = None) -> tuple[DeviceService, Device]:
    info = text_format.Parse((fixtures / "l2_mcast.p4info.txtpb").read_text(),
                             p4info_pb2.P4Info())
    doc = json.loads((fixtures / "l2_mcast.json").read_text())
    if edit is not None:
        edit(info, doc)
    dev = Device()
    svc = DeviceService(dev)
    cfg = pb.ForwardingPipelineConfig(p4info=info, p4_device_config=json.dumps(doc).encode())
    svc.set_pipeline(pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, cfg)
    return svc, dev


def write(svc: DeviceService, kind: int, te: pb.TableEntry) -> tuple[Code, str]:
    u = pb.Update(type=kind)
    u.entity.table_entry.CopyFrom(te)
    (res,) = svc.write([u])
    return res


def read(svc: DeviceService, te: pb.TableEntry) -> list[pb.TableEntry]:
    e = pb.Entity()
    e.table_entry.CopyFrom(te)
    return [x.table_entry for x in svc.read([e])]


def entry(table: int, action: int, params: tuple[bytes, ...] = (), priority: int = 0,
          **matches: Any) -> pb.TableEntry:
    te = pb.TableEntry(table_id=table, priority=priority)
    for fid, (kind, vals) in sorted(matches.items()):
        m = te.match.add(field_id=int(fid[1:]))
        for attr, v in vals.items():
            setattr(getattr(m, kind), attr, v)
    te.action.action.action_id = action
    for i, p in enumerate(params, 1):
        te.action.action.params.add(param_id=i, value=p)
    return te


def default(table: int, action: int | None = None, params: tuple[bytes, ...] = ()
            ) -> pb.TableEntry:
    te = pb.TableEntry(table_id=table, is_default_action=True)
    if action is not None:
        te.action.action.action_id = action
        for i, p in enumerate(params, 1):
            te.action.action.params.add(param_id=i, value=p)
    return te


def frame(dst: int, src: int = 0x0A0000000001, etype: int = 0x0800) -> bytes:
    return dst.to_bytes(6, "big") + src.to_bytes(6, "big") + etype.to_bytes(2, "big") + b"x" * 20


def dmac_json(doc: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in doc["pipelines"][0]["tables"] if t["name"] == "L2Ingress.dmac")


# ---------------------------------------------------------------- default entry reset

def test_modify_default_without_action_resets_to_the_programs_default(p4c_fixtures: Path
                                                                      ) -> None:
    svc, dev = service(p4c_fixtures)
    assert write(svc, INSERT, entry(DMAC, FORWARD, (b"\x02",), f1=("exact", {"value": b"\x05"})))[0] == Code.OK
    # replica_rewrite's default tags every frame leaving the switch with VLAN 7 ...
    te = default(REWRITE, SET_VLAN, (b"\x07",))
    te.metadata = b"cookie"
    assert write(svc, MODIFY, te) == (Code.OK, "")
    (out,) = dev.process(1, frame(5))
    assert out[0] == 2 and out[1][12:16] == b"\x81\x00\x00\x07"
    (got,) = read(svc, default(REWRITE))
    assert got.action.action.action_id == SET_VLAN and got.metadata == b"cookie"
    # ... until a MODIFY without an action puts back `default_action = NoAction()` (the P4
    # source), and the cookie goes with it.
    assert write(svc, MODIFY, default(REWRITE)) == (Code.OK, "")
    (got,) = read(svc, default(REWRITE))
    assert got.action.action.action_id == NOACTION and not got.action.action.params
    assert got.metadata == b""
    (out,) = dev.process(1, frame(5))
    assert out == (2, frame(5))


def test_reset_of_a_const_default_is_permission_denied(p4c_fixtures: Path) -> None:
    def const_default(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
        dmac_json(doc)["default_entry"]["action_const"] = True
        next(t for t in info.tables if t.preamble.id == DMAC).const_default_action_id = NOACTION
    svc, _ = service(p4c_fixtures, const_default)
    assert write(svc, MODIFY, default(DMAC))[0] == Code.PERMISSION_DENIED


@pytest.mark.parametrize("kind", [INSERT, DELETE])
def test_default_entry_without_action_is_only_a_modify(p4c_fixtures: Path, kind: int) -> None:
    svc, _ = service(p4c_fixtures)
    assert write(svc, kind, default(REWRITE))[0] == Code.INVALID_ARGUMENT


# ---------------------------------------------------------------- leniency as PI

def test_table_missing_from_the_json_fails_only_its_requests(p4c_fixtures: Path) -> None:
    # What p4c does to a table it optimises away: the P4Info keeps it, the JSON has none.
    def drop_acl(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
        ing = doc["pipelines"][0]
        ing["tables"] = [t for t in ing["tables"] if t["name"] != "L2Ingress.acl"]
        for t in ing["tables"]:
            t["next_tables"] = {k: (None if v == "L2Ingress.acl" else v)
                                for k, v in t["next_tables"].items()}
            if t.get("base_default_next") == "L2Ingress.acl":
                t["base_default_next"] = None
        for c in ing["conditionals"]:
            for k in ("true_next", "false_next"):
                if c.get(k) == "L2Ingress.acl":
                    c[k] = None
    svc, dev = service(p4c_fixtures, drop_acl)
    deny = entry(ACL, DENY, (), 1, f1=("ternary", {"value": b"\x01", "mask": b"\xff"}))
    assert write(svc, INSERT, deny)[0] == Code.UNKNOWN
    assert write(svc, MODIFY, deny)[0] == Code.NOT_FOUND
    assert write(svc, DELETE, deny)[0] == Code.NOT_FOUND
    assert write(svc, MODIFY, default(ACL, DENY))[0] == Code.UNKNOWN
    assert read(svc, pb.TableEntry(table_id=ACL)) == []
    with pytest.raises(P4RTError) as err:
        read(svc, default(ACL))
    assert err.value.code == Code.UNKNOWN
    # The rest of the program works.
    assert write(svc, INSERT, entry(DMAC, FORWARD, (b"\x03",), f1=("exact", {"value": b"\x09"})))[0] == Code.OK
    assert len(read(svc, pb.TableEntry())) == 1
    assert dev.process(1, frame(9)) == [(3, frame(9))]


def test_repeated_match_field_ids_bind_in_order(p4c_fixtures: Path) -> None:
    def repeat_id(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
        acl = next(t for t in info.tables if t.preamble.id == ACL)
        acl.match_fields[2].id = 2          # hdr.vlan.vid and sm.ingress_port both id 2
    svc, dev = service(p4c_fixtures, repeat_id)
    assert write(svc, INSERT, entry(DMAC, FORWARD, (b"\x02",), f1=("exact", {"value": b"\x05"})))[0] == Code.OK
    te = entry(ACL, DENY, (), 1)
    te.match.add(field_id=2).range.low = b"\x03"          # ingress_port 3..4
    te.match[0].range.high = b"\x04"
    te.match[0].ClearField("range")
    te.match[0].ternary.value = b"\x00"                    # first id-2 field: vid ternary 0/fff
    te.match[0].ternary.mask = b"\x0f\xff"
    r = te.match.add(field_id=2)
    r.range.low, r.range.high = b"\x03", b"\x04"
    assert write(svc, INSERT, te) == (Code.OK, "")
    # vid of an untagged frame is 0 (invalid header reads 0): ports 3, 4 denied, 1 not.
    assert dev.process(3, frame(5)) == [] and dev.process(4, frame(5)) == []
    assert dev.process(1, frame(5)) == [(2, frame(5))]
    (got,) = read(svc, pb.TableEntry(table_id=ACL))
    assert [(m.field_id, m.WhichOneof("field_match_type")) for m in got.match] == \
        [(2, "ternary"), (2, "range")]


def test_key_on_a_masked_expression_takes_the_full_width_value(p4c_fixtures: Path) -> None:
    # `hdr.eth.dst & 0x0000000000ff : exact` (p4c: target dst, mask; P4Info width 48).
    def mask_key(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
        dmac_json(doc)["key"][0]["mask"] = "0x0000000000ff"
    svc, dev = service(p4c_fixtures, mask_key)
    assert write(svc, INSERT, entry(DMAC, FORWARD, (b"\x04",), f1=("exact", {"value": b"\x33"}))) == (Code.OK, "")
    assert dev.process(1, frame(0xAABBCCDDEE33)) == [(4, frame(0xAABBCCDDEE33))]


def test_key_on_a_slice_takes_the_slice_value(p4c_fixtures: Path) -> None:
    # `hdr.eth.dst[15:8] : exact` (p4c: target dst, mask 0xff00; P4Info width 8).
    def slice_key(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
        dmac_json(doc)["key"][0]["mask"] = "0x00000000ff00"
        next(t for t in info.tables if t.preamble.id == DMAC).match_fields[0].bitwidth = 8
    svc, dev = service(p4c_fixtures, slice_key)
    assert write(svc, INSERT, entry(DMAC, FORWARD, (b"\x04",), f1=("exact", {"value": b"\x12"}))) == (Code.OK, "")
    assert dev.process(1, frame(0x00000000127F)) == [(4, frame(0x00000000127F))]
    (got,) = read(svc, pb.TableEntry(table_id=DMAC))
    assert got.match[0].exact.value == b"\x12"             # read back as written
    assert write(svc, INSERT, entry(DMAC, FORWARD, (b"\x04",), f1=("exact", {"value": b"\x01\x00"})))[0] \
        == Code.INVALID_ARGUMENT                            # wider than the 8-bit slice


def test_optional_field_p4c_writes_as_ternary(p4c_fixtures: Path) -> None:
    # p4c writes an `optional` key element as match_type "ternary" in the JSON, OPTIONAL in
    # the P4Info; the server turns optional values into all-ones or zero masks.
    def optional_src(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
        acl = next(t for t in info.tables if t.preamble.id == ACL)
        acl.match_fields[0].match_type = p4info_pb2.MatchField.OPTIONAL
    svc, dev = service(p4c_fixtures, optional_src)
    write(svc, INSERT, entry(DMAC, FORWARD, (b"\x02",), f1=("exact", {"value": b"\x05"})))
    te = entry(ACL, DENY, (), 1, f1=("optional", {"value": b"\x0a\x00\x00\x00\x00\x07"}))
    assert write(svc, INSERT, te) == (Code.OK, "")
    assert dev.process(1, frame(5, src=0x0A0000000007)) == []
    assert dev.process(1, frame(5, src=0x0A0000000008)) == [(2, frame(5, src=0x0A0000000008))]
    (got,) = read(svc, pb.TableEntry(table_id=ACL))
    assert got == te


def test_same_named_actions_resolve_per_table(p4c_fixtures: Path) -> None:
    # p4c emits one JSON action per table that uses it; here acl's NoAction copy gets a
    # parameter, as a copy specialised for its table can: dmac's NoAction stays usable.
    def acl_noaction_param(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
        acl = next(t for t in doc["pipelines"][0]["tables"] if t["name"] == "L2Ingress.acl")
        aid = acl["action_ids"][acl["actions"].index("NoAction")]
        copy = next(a for a in doc["actions"] if a["id"] == aid)
        copy["runtime_data"] = [{"name": "unused", "bitwidth": 8}]
        acl["default_entry"]["action_data"] = ["0x00"]
    svc, dev = service(p4c_fixtures, acl_noaction_param)
    names = [a["name"] for a in json.loads(svc.get_pipeline(pb.GetForwardingPipelineConfigRequest.ALL).p4_device_config)["actions"]]
    assert names.count("NoAction") == 3
    assert write(svc, INSERT, entry(DMAC, NOACTION, (), f1=("exact", {"value": b"\x05"})))[0] == Code.OK
    acl_te = entry(ACL, NOACTION, (), 1, f1=("ternary", {"value": b"\x01", "mask": b"\xff"}))
    code, msg = write(svc, INSERT, acl_te)
    assert code == Code.UNKNOWN and "parameter" in msg
    assert write(svc, INSERT, entry(ACL, DENY, (), 1, f1=("ternary", {"value": b"\x01", "mask": b"\xff"})))[0] == Code.OK


def test_counter_missing_from_the_json_fails_on_access(p4c_fixtures: Path) -> None:
    def extra_counter(info: p4info_pb2.P4Info, doc: dict[str, Any]) -> None:
        c = info.counters.add()
        c.preamble.id, c.preamble.name, c.preamble.alias = 0x12000042, "L2Ingress.ghost", "ghost"
        c.size = 4
    svc, _ = service(p4c_fixtures, extra_counter)
    e = pb.Entity()
    e.counter_entry.counter_id = 0x12000042
    with pytest.raises(P4RTError) as err:
        svc.read([e])
    assert err.value.code == Code.UNKNOWN and "ghost" in err.value.message
