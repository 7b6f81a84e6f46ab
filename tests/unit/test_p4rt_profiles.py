"""Action selectors over P4Runtime (DeviceService, no gRPC) on a program of this test, with the
member each packet takes worked out by hand as bmv2 picks it: crc16 (CRC-16/ARC) over the
selector's fields (eth.src ++ eth.type, 8 bytes), modulo the group's size, over its target
members in ascending handle order -- where a member of weight w is w target members (PI).
Also: members, groups and one-shot entries read back as written, PI's codes for ids in use
and unknown, and the two programming modes kept apart."""
from __future__ import annotations

import pytest
from p4.v1 import p4runtime_pb2 as pb

from netsum import p4c as compiler
from p4helpers import crc16_arc
from netsum.switch.device import Device
from netsum.switch.p4rt.service import DeviceService

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct hs { eth_t eth; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.eth); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    action_selector(HashAlgorithm.crc16, 32w64, 32w10) sel;
    action set_port(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table ecmp {
        key = { h.eth.dst: exact; h.eth.src: selector; h.eth.type: selector; }
        actions = { set_port; drop; }
        implementation = sel;
        size = 128;
    }
    apply { ecmp.apply(); }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
INSERT, MODIFY, DELETE = pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE




class Rig:
    def __init__(self) -> None:
        res = compiler.compile_source(PROGRAM)
        self.info = res.p4info
        self.dev = Device(device_id=0)
        self.svc = DeviceService(self.dev)
        self.svc.set_pipeline(pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                              pb.ForwardingPipelineConfig(
                                  p4info=res.p4info, p4_device_config=res.json_text().encode()))
        self.prof = res.p4info.action_profiles[0].preamble.id
        self.table = res.p4info.tables[0].preamble.id
        self.set_port = next(a.preamble.id for a in res.p4info.actions
                             if a.preamble.name == "I.set_port")

    def action(self, port: int) -> pb.Action:
        a = pb.Action(action_id=self.set_port)
        a.params.add(param_id=1, value=port.to_bytes(2, "big"))
        return a

    def write(self, *updates: pb.Update) -> list[int]:
        return [int(c) for c, _ in self.svc.write(list(updates))]

    def member(self, kind: int, mid: int, port: int) -> pb.Update:
        u = pb.Update(type=kind)
        m = u.entity.action_profile_member
        m.action_profile_id, m.member_id = self.prof, mid
        m.action.CopyFrom(self.action(port))
        return u

    def group(self, kind: int, gid: int, members: dict[int, int]) -> pb.Update:
        u = pb.Update(type=kind)
        g = u.entity.action_profile_group
        g.action_profile_id, g.group_id = self.prof, gid
        for mid, w in members.items():
            g.members.add(member_id=mid, weight=w)
        return u

    def entry(self, kind: int, dst: int, **action: object) -> pb.Update:
        u = pb.Update(type=kind)
        te = u.entity.table_entry
        te.table_id = self.table
        te.match.add(field_id=1).exact.value = dst.to_bytes(6, "big")
        if "member" in action:
            te.action.action_profile_member_id = action["member"]   # type: ignore[assignment]
        if "group" in action:
            te.action.action_profile_group_id = action["group"]     # type: ignore[assignment]
        for port, w in action.get("oneshot", []):                   # type: ignore[attr-defined]
            a = te.action.action_profile_action_set.action_profile_actions.add(weight=w)
            a.action.CopyFrom(self.action(port))
        return u

    def port_of(self, dst: int, src: int, etype: int = 0x0800) -> int | None:
        frame = dst.to_bytes(6, "big") + src.to_bytes(6, "big") + etype.to_bytes(2, "big")
        out = self.dev.process(1, frame + b"x" * 20)
        return out[0][0] if out else None


def expected(ports: list[int], src: int, etype: int = 0x0800) -> int:
    return ports[crc16_arc(src.to_bytes(6, "big") + etype.to_bytes(2, "big")) % len(ports)]


def test_group_members_are_chosen_by_the_selector_hash_with_weights() -> None:
    r = Rig()
    assert r.write(r.member(INSERT, 10, 2), r.member(INSERT, 20, 3), r.member(INSERT, 30, 4),
                   r.group(INSERT, 1, {10: 1, 20: 2, 30: 1}),
                   r.entry(INSERT, 0xA, group=1), r.entry(INSERT, 0xB, member=30)) == [0] * 6
    # Target members: 10 -> h0 (2), 20 -> h1 (3), 30 -> h2 (4), 20's weight copy -> h3 (3).
    for src in range(64):
        assert r.port_of(0xA, src) == expected([2, 3, 4, 3], src), src
    assert r.port_of(0xB, 7) == 4
    # The group without member 10: handles h1, h2, h3 -> 3, 4, 3.
    assert r.write(r.group(MODIFY, 1, {20: 2, 30: 1})) == [0]
    for src in range(32):
        assert r.port_of(0xA, src, 0x86DD) == expected([3, 4, 3], src, 0x86DD)
    # Weight 1 again: 20's copy is purged, so the group is h1, h2.
    assert r.write(r.group(MODIFY, 1, {20: 1, 30: 1})) == [0]
    for src in range(32):
        assert r.port_of(0xA, src) == expected([3, 4], src)
    # A member's new action reaches its copies and the entries using it.
    assert r.write(r.member(MODIFY, 30, 5)) == [0]
    assert r.port_of(0xB, 1) == 5


def test_reads_codes_and_in_use() -> None:
    r = Rig()
    assert r.write(r.member(INSERT, 10, 2), r.member(INSERT, 20, 3),
                   r.group(INSERT, 1, {10: 1, 20: 3}), r.entry(INSERT, 0xA, group=1)) == [0] * 4
    got = r.svc.read([pb.Entity(action_profile_group=pb.ActionProfileGroup())])
    assert [(m.member_id, m.weight) for m in got[0].action_profile_group.members] == \
        [(10, 1), (20, 3)]
    got = r.svc.read([pb.Entity(action_profile_member=pb.ActionProfileMember(
        action_profile_id=r.prof))])
    assert [(e.action_profile_member.member_id,
             e.action_profile_member.action.params[0].value) for e in got] == \
        [(10, b"\x02"), (20, b"\x03")]
    (te,) = r.svc.read([pb.Entity(table_entry=pb.TableEntry(table_id=r.table))])
    assert te.table_entry.action.action_profile_group_id == 1
    assert r.write(r.member(INSERT, 10, 9)) == [6]                  # ALREADY_EXISTS
    assert r.write(r.member(MODIFY, 99, 9)) == [5]                  # NOT_FOUND
    assert r.write(r.member(DELETE, 10, 0)) == [2]                  # in a group: UNKNOWN
    assert r.write(r.group(DELETE, 1, {})) == [2]                   # used by an entry
    assert r.write(r.group(INSERT, 2, {77: 1})) == [5]              # unknown member
    assert r.write(r.entry(INSERT, 0xB, member=77)) == [3]          # INVALID_ARGUMENT
    assert r.write(r.entry(INSERT, 0xC, oneshot=[(4, 1)])) == [3]   # the other mode
    # Unwinding: entry, group, members.
    assert r.write(r.entry(DELETE, 0xA), r.group(DELETE, 1, {}), r.member(DELETE, 10, 0),
                   r.member(DELETE, 20, 0)) == [0] * 4
    assert r.svc.read([pb.Entity(action_profile_member=pb.ActionProfileMember())]) == []
    assert r.dev.pipeline.action_profiles["I.sel"].members == {}     # copies purged too


def test_one_shot_action_sets() -> None:
    r = Rig()
    assert r.write(r.entry(INSERT, 0xA, oneshot=[(2, 1), (6, 2)])) == [0]
    for src in range(32):
        assert r.port_of(0xA, src) == expected([2, 6, 6], src)
    (te,) = r.svc.read([pb.Entity(table_entry=pb.TableEntry(table_id=r.table))])
    acts = te.table_entry.action.action_profile_action_set.action_profile_actions
    assert [(a.action.params[0].value, a.weight) for a in acts] == [(b"\x02", 1), (b"\x06", 2)]
    assert r.write(r.entry(MODIFY, 0xA, oneshot=[(7, 1)])) == [0]
    assert r.port_of(0xA, 3) == 7
    assert r.write(r.member(INSERT, 1, 2)) == [3]                   # the other mode
    ap = r.dev.pipeline.action_profiles["I.sel"]
    assert len(ap.members) == 1 and len(ap.groups) == 1             # the old set is gone
    assert r.write(r.entry(DELETE, 0xA)) == [0]
    assert ap.members == {} and ap.groups == {}
    assert r.write(r.member(INSERT, 1, 2)) == [0]                   # mode free again


@pytest.mark.parametrize("bad", ["direct action"])
def test_an_indirect_table_refuses_a_direct_action(bad: str) -> None:
    r = Rig()
    u = r.entry(INSERT, 0xA)
    u.entity.table_entry.action.action.CopyFrom(r.action(2))
    assert r.write(u) == [3]
