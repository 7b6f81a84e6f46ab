"""Real p4c output of public programs through P4Runtime: finsy's ngsdn (an action selector
with one-shot-capable groups) and INT (a checksum over a whole header).  The JSON/P4Info are
finsy's repository files, not part of this repository: point NETSUM_FINSY_REPO at a checkout
of github.com/byllyfish/finsy (any revision with examples/ngsdn and examples/int) to run this;
without it the test is skipped."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from netsum.switch.device import Device
from netsum.switch.p4rt.service import DeviceService

REPO = Path(os.environ.get("NETSUM_FINSY_REPO", "/nonexistent"))
NGSDN = REPO / "examples" / "ngsdn" / "ngsdn" / "p4"
INT = REPO / "examples" / "int" / "p4" / "int_v1.0"
pytestmark = pytest.mark.skipif(not NGSDN.is_dir(), reason="NETSUM_FINSY_REPO (a finsy "
                                "checkout) is not set: the public programs are not here")


def _service(json_path: Path, p4info_path: Path) -> tuple[DeviceService, p4info_pb2.P4Info]:
    info = text_format.Parse(p4info_path.read_text(), p4info_pb2.P4Info())
    svc = DeviceService(Device(device_id=0))
    svc.set_pipeline(pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                     pb.ForwardingPipelineConfig(p4info=info,
                                                 p4_device_config=json_path.read_bytes()))
    return svc, info


def test_ngsdn_loads_and_takes_members_groups_and_routes() -> None:
    svc, info = _service(NGSDN / "main.json", NGSDN / "main.p4info.txtpb")
    prof = info.action_profiles[0]
    table = next(t for t in info.tables if t.preamble.id in prof.table_ids)
    action = next(a for a in info.actions if a.preamble.id in
                  {r.id for r in table.action_refs} and a.params)
    ups = []
    for mid in (1, 2):
        u = pb.Update(type=pb.Update.INSERT)
        m = u.entity.action_profile_member
        m.action_profile_id, m.member_id = prof.preamble.id, mid
        m.action.action_id = action.preamble.id
        for p in action.params:
            m.action.params.add(param_id=p.id, value=bytes([mid]))
        ups.append(u)
    u = pb.Update(type=pb.Update.INSERT)
    g = u.entity.action_profile_group
    g.action_profile_id, g.group_id = prof.preamble.id, 7
    g.members.add(member_id=1, weight=1)
    g.members.add(member_id=2, weight=1)
    ups.append(u)
    assert [int(c) for c, _ in svc.write(ups)] == [0, 0, 0]
    got = svc.read([pb.Entity(action_profile_group=pb.ActionProfileGroup())])
    assert [m.member_id for m in got[0].action_profile_group.members] == [1, 2]


def test_int_loads() -> None:
    svc, _info = _service(INT / "int.json", INT / "int.p4info.txtpb")
    assert svc.has_pipeline()
