"""Edge cases of the P4Runtime server with protobuf requests written by hand (through the
client library's SwitchClient, or its raw stub): pipeline config actions, every error code PI
reports (and how: batch errors in grpc-status-details-bin), value encodings, wildcard reads, PRE
and stateful entities.  Real p4c output is the pipeline."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2 as pb

from helpers import embedded_server, p4rt_client
from netsum.p4rt.client import SwitchClient
from netsum.p4rt.errors import ClientError
from netsum.switch.device import Device
from netsum.switch.p4rt import P4RuntimeServer

DEVICE_ID = 7
INSERT, MODIFY, DELETE = pb.Update.INSERT, pb.Update.MODIFY, pb.Update.DELETE
Cfg = pb.SetForwardingPipelineConfigRequest
# l2_mcast ids (real p4c output)
DMAC, ACL, REWRITE = 36472220, 43605182, 38207029
FORWARD, FLOOD, NOACTION, DENY, SET_VLAN = 25122418, 17556812, 21257015, 28235802, 23871574
DMAC_HITS = 334377091
# calc_state ids
CALC_OPS, OP_ADD, PER_OP, ACC = 49456595, 33046005, 318385741, 384638555


def load(fixtures: Path, name: str) -> tuple[p4info_pb2.P4Info, bytes]:
    info = text_format.Parse((fixtures / f"{name}.p4info.txtpb").read_text(), p4info_pb2.P4Info())
    return info, (fixtures / f"{name}.json").read_bytes()


@pytest.fixture
def server() -> Iterator[tuple[Device, P4RuntimeServer]]:
    with embedded_server(DEVICE_ID) as made:
        yield made


@pytest.fixture
def client(server: tuple[Device, P4RuntimeServer]) -> Iterator[SwitchClient]:
    c = p4rt_client(f"127.0.0.1:{server[1].port}", DEVICE_ID, election_id=10)
    c.connect()
    assert c.arbitration is not None and c.arbitration.status.code == 0
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def l2(client: SwitchClient, p4c_fixtures: Path) -> SwitchClient:
    client.set_pipeline(*load(p4c_fixtures, "l2_mcast"))
    return client


# ---------------------------------------------------------------- message builders

def update(kind: int, **entity: object) -> pb.Update:
    u = pb.Update(type=kind)
    for name, msg in entity.items():
        getattr(u.entity, name).CopyFrom(msg)
    return u


def dmac(dst: bytes, action: int = FORWARD, params: tuple[bytes, ...] = (b"\x01",),
         priority: int = 0) -> pb.TableEntry:
    te = pb.TableEntry(table_id=DMAC, priority=priority)
    te.match.add(field_id=1).exact.value = dst
    te.action.action.action_id = action
    for i, v in enumerate(params, 1):
        te.action.action.params.add(param_id=i, value=v)
    return te


def default_entry(action: int, params: tuple[bytes, ...] = ()) -> pb.TableEntry:
    te = pb.TableEntry(table_id=DMAC, is_default_action=True)
    te.action.action.action_id = action
    for i, v in enumerate(params, 1):
        te.action.action.params.add(param_id=i, value=v)
    return te


def acl(src: bytes, mask: bytes, priority: int, low: bytes | None = None,
        high: bytes | None = None) -> pb.TableEntry:
    te = pb.TableEntry(table_id=ACL, priority=priority)
    m = te.match.add(field_id=1)
    m.ternary.value, m.ternary.mask = src, mask
    if low is not None:
        r = te.match.add(field_id=3)
        r.range.low, r.range.high = low, high
    te.action.action.action_id = DENY
    return te


def group(mgid: int, *replicas: tuple[int, int], use_port_bytes: bool = False
          ) -> pb.PacketReplicationEngineEntry:
    pre = pb.PacketReplicationEngineEntry()
    pre.multicast_group_entry.multicast_group_id = mgid
    for port, rid in replicas:
        r = pre.multicast_group_entry.replicas.add(instance=rid)
        if use_port_bytes:
            r.port = port.to_bytes(2, "big")
        else:
            r.egress_port = port
    return pre


def clone(sid: int, *replicas: tuple[int, int], cos: int = 0, length: int = 0
          ) -> pb.PacketReplicationEngineEntry:
    pre = pb.PacketReplicationEngineEntry()
    cs = pre.clone_session_entry
    cs.session_id, cs.class_of_service, cs.packet_length_bytes = sid, cos, length
    for port, rid in replicas:
        cs.replicas.add(egress_port=port, instance=rid)
    return pre


def counter(cid: int, index: int | None, packets: int = 0) -> pb.CounterEntry:
    ce = pb.CounterEntry(counter_id=cid)
    if index is not None:
        ce.index.index = index
    ce.data.packet_count = packets
    return ce


def write_error(client: SwitchClient, *updates: pb.Update) -> list[tuple[int, str]]:
    with pytest.raises(ClientError) as err:
        client.write(updates)
    assert err.value.code == "UNKNOWN"
    errs = err.value.statuses
    assert len(errs) == len(updates) and [e.index for e in errs] == list(range(len(updates)))
    assert all(e.space == "ALL-sswitch-p4org" for e in errs if e.code)
    return [(e.code, e.message) for e in errs]


def rpc_code(fn: Callable[[], object]) -> tuple[grpc.StatusCode, str]:
    """The status a call failed with: through the library (ClientError) or the raw stub."""
    try:
        fn()
    except ClientError as exc:
        return grpc.StatusCode[exc.code], exc.detail
    except grpc.RpcError as exc:
        return exc.code(), exc.details()
    pytest.fail("the call did not fail")


def read_all(client: SwitchClient, **entity: object) -> list[pb.Entity]:
    e = pb.Entity()
    for name, msg in entity.items():
        getattr(e, name).CopyFrom(msg)
    return client.read([e])


# ---------------------------------------------------------------- pipeline config

def test_before_any_config_everything_is_failed_precondition(client: SwitchClient) -> None:
    msg = "No forwarding pipeline config set for this device"
    for call in (lambda: client.write([update(INSERT, table_entry=dmac(b"\x01"))]),
                 lambda: read_all(client, table_entry=pb.TableEntry()),
                 lambda: client.get_config()):
        assert rpc_code(call) == (grpc.StatusCode.FAILED_PRECONDITION, msg)


def test_unspecified_action_is_invalid_argument(client: SwitchClient, p4c_fixtures: Path) -> None:
    code, _ = rpc_code(lambda: client.set_pipeline(*load(p4c_fixtures, "l2_mcast"),
                                                    action=Cfg.UNSPECIFIED))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_p4info_json_mismatch_fails_the_requests_as_pi_does(client: SwitchClient,
                                                            p4c_fixtures: Path) -> None:
    # PI compares nothing at SetForwardingPipelineConfig: bmv2 loads the JSON, and a table of
    # the P4Info that the JSON lacks fails the writes that use it (UNKNOWN from the target).
    info, _ = load(p4c_fixtures, "l2_mcast")
    _, other_json = load(p4c_fixtures, "calc_state")
    client.set_pipeline(info, other_json)
    (err,) = write_error(client, update(INSERT, table_entry=dmac(b"\x01")))
    assert err[0] == 2 and "L2Ingress.dmac" in err[1]
    assert read_all(client, table_entry=pb.TableEntry()) == []
    code, _ = rpc_code(lambda: client.set_pipeline(info, b"{not json"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_verify_save_commit_and_get_response_types(client: SwitchClient, p4c_fixtures: Path
                                                   ) -> None:
    info, js = load(p4c_fixtures, "l2_mcast")
    client.set_pipeline(info, js, action=Cfg.VERIFY)
    assert rpc_code(client.get_config)[0] == grpc.StatusCode.FAILED_PRECONDITION
    assert rpc_code(lambda: client.set_pipeline(info, js, action=Cfg.COMMIT))[0] == \
        grpc.StatusCode.FAILED_PRECONDITION
    client.set_pipeline(info, js, action=Cfg.VERIFY_AND_SAVE, cookie=77)
    assert rpc_code(client.get_config)[0] == grpc.StatusCode.FAILED_PRECONDITION
    req = pb.SetForwardingPipelineConfigRequest(device_id=DEVICE_ID, action=Cfg.COMMIT)
    req.election_id.low = 10
    client.stub.SetForwardingPipelineConfig(req)
    R = pb.GetForwardingPipelineConfigRequest
    got = {rt: client.get_config(rt) for rt in (R.ALL, R.COOKIE_ONLY, R.P4INFO_AND_COOKIE,
                                                  R.DEVICE_CONFIG_AND_COOKIE)}
    assert all(c.cookie.cookie == 77 for c in got.values())
    assert got[R.ALL].p4info == info and got[R.ALL].p4_device_config == js
    assert not got[R.COOKIE_ONLY].HasField("p4info") and not got[R.COOKIE_ONLY].p4_device_config
    assert got[R.P4INFO_AND_COOKIE].p4info == info and not got[R.P4INFO_AND_COOKIE].p4_device_config
    assert not got[R.DEVICE_CONFIG_AND_COOKIE].HasField("p4info")
    assert got[R.DEVICE_CONFIG_AND_COOKIE].p4_device_config == js


def test_commit_wipes_state_and_reconcile_keeps_it(l2: SwitchClient, p4c_fixtures: Path,
                                                   server: tuple[Device, P4RuntimeServer]) -> None:
    info, js = load(p4c_fixtures, "l2_mcast")
    l2.write([update(INSERT, table_entry=dmac(b"\x01")),
              update(INSERT, packet_replication_engine_entry=group(3, (1, 1)))])
    l2.set_pipeline(info, js, action=Cfg.RECONCILE_AND_COMMIT)
    assert len(read_all(l2, table_entry=pb.TableEntry(table_id=DMAC))) == 1
    assert len(read_all(l2, packet_replication_engine_entry=group(0))) == 1
    frame = bytes.fromhex("000000000001" "0000000000aa" "0800") + b"x" * 46
    assert [port for port, _ in server[0].process(2, frame)] == [1]
    l2.set_pipeline(info, js, action=Cfg.VERIFY_AND_COMMIT)
    assert read_all(l2, table_entry=pb.TableEntry(table_id=DMAC)) == []
    assert read_all(l2, packet_replication_engine_entry=group(0)) == []


def test_capabilities(client: SwitchClient) -> None:
    assert client.stub.Capabilities(pb.CapabilitiesRequest()).p4runtime_api_version == "1.3.0"


# ---------------------------------------------------------------- write errors

def test_only_continue_on_error_atomicity(l2: SwitchClient) -> None:
    for atomicity in (pb.WriteRequest.ROLLBACK_ON_ERROR, pb.WriteRequest.DATAPLANE_ATOMIC):
        code, _ = rpc_code(lambda: l2.write([update(INSERT, table_entry=dmac(b"\x01"))],
                                            atomicity=atomicity))
        assert code == grpc.StatusCode.UNIMPLEMENTED
    assert read_all(l2, table_entry=pb.TableEntry()) == []


def test_partly_failed_batch_reports_each_update_in_order(l2: SwitchClient) -> None:
    errs = write_error(l2, update(INSERT, table_entry=dmac(b"\x01")),
                       update(INSERT, table_entry=dmac(b"\x01")),
                       update(INSERT, table_entry=dmac(b"\x02")),
                       update(DELETE, table_entry=dmac(b"\x09")))
    assert [c for c, _ in errs] == [0, 6, 0, 5]     # OK, ALREADY_EXISTS, OK, NOT_FOUND
    assert len(read_all(l2, table_entry=pb.TableEntry(table_id=DMAC))) == 2


def _with(te: pb.TableEntry, edit: Callable[[pb.TableEntry], None]) -> pb.TableEntry:
    edit(te)
    return te


BAD_UPDATES: list[tuple[str, Callable[[], pb.Update], int]] = [
    ("modify missing", lambda: update(MODIFY, table_entry=dmac(b"\x05")), 5),
    ("delete missing", lambda: update(DELETE, table_entry=dmac(b"\x05")), 5),
    ("insert default", lambda: update(INSERT, table_entry=default_entry(NOACTION)), 3),
    ("delete default", lambda: update(DELETE, table_entry=default_entry(NOACTION)), 3),
    ("value wider than field", lambda: update(INSERT, table_entry=dmac(b"\x01" + b"\x00" * 6)), 3),
    ("param wider than field", lambda: update(INSERT, table_entry=dmac(b"\x01", params=(b"\x02\x00",))), 3),
    ("empty value", lambda: update(INSERT, table_entry=dmac(b"")), 3),
    ("exact table with priority", lambda: update(INSERT, table_entry=dmac(b"\x01", priority=3)), 3),
    ("ternary table without priority", lambda: update(INSERT, table_entry=acl(b"\x01", b"\xff", 0)), 3),
    ("ternary mask zero", lambda: update(INSERT, table_entry=acl(b"\x00", b"\x00", 1)), 3),
    ("ternary value outside mask", lambda: update(INSERT, table_entry=acl(b"\x03", b"\x01", 1)), 3),
    ("range low > high", lambda: update(INSERT, table_entry=acl(b"\x01", b"\xff", 1, b"\x05", b"\x01")), 3),
    ("unknown table", lambda: update(INSERT, table_entry=_with(dmac(b"\x01"), lambda t: setattr(t, "table_id", 1))), 3),
    ("unknown action", lambda: update(INSERT, table_entry=dmac(b"\x01", action=12345)), 3),
    ("action of another table", lambda: update(INSERT, table_entry=dmac(b"\x01", action=SET_VLAN, params=(b"\x01",))), 3),
    ("missing param", lambda: update(INSERT, table_entry=dmac(b"\x01", params=())), 3),
    ("missing exact field", lambda: update(INSERT, table_entry=_with(dmac(b"\x01"), lambda t: t.ClearField("match"))), 3),
    ("unspecified update type", lambda: update(pb.Update.UNSPECIFIED, table_entry=dmac(b"\x01")), 3),
    ("empty entity", lambda: pb.Update(type=INSERT), 3),
    ("multicast group 0", lambda: update(INSERT, packet_replication_engine_entry=group(0, (1, 1))), 3),
    ("multicast group 32768", lambda: update(INSERT, packet_replication_engine_entry=group(32768, (1, 1))), 11),
    ("duplicate replica", lambda: update(INSERT, packet_replication_engine_entry=group(5, (1, 1), (1, 1))), 3),
    ("modify missing group", lambda: update(MODIFY, packet_replication_engine_entry=group(6, (1, 1))), 5),
    ("clone class_of_service", lambda: update(INSERT, packet_replication_engine_entry=clone(5, (1, 0), cos=2)), 12),
    ("clone session 0", lambda: update(INSERT, packet_replication_engine_entry=clone(0, (1, 0))), 3),
    ("counter insert", lambda: update(INSERT, counter_entry=counter(DMAC_HITS, 0)), 3),
    # l2_mcast has no action profile: id 0 is an invalid P4 id (PI: INVALID_ARGUMENT).
    ("action profile member", lambda: update(INSERT, action_profile_member=pb.ActionProfileMember()), 3),
]


@pytest.mark.parametrize("name,make,code", BAD_UPDATES, ids=[b[0] for b in BAD_UPDATES])
def test_bad_update_has_pi_code_and_changes_nothing(l2: SwitchClient, name: str,
                                                    make: Callable[[], pb.Update], code: int
                                                    ) -> None:
    before = read_all(l2, table_entry=pb.TableEntry())
    (err,) = write_error(l2, make())
    assert err[0] == code, err
    assert err[1]
    assert read_all(l2, table_entry=pb.TableEntry()) == before
    assert read_all(l2, packet_replication_engine_entry=group(0)) == []


def test_const_default_action_is_permission_denied(client: SwitchClient, p4c_fixtures: Path
                                                   ) -> None:
    # What p4c emits for `const default_action = NoAction();` on dmac.
    info, js = load(p4c_fixtures, "l2_mcast")
    doc = json.loads(js)
    dmac_json = next(t for t in doc["pipelines"][0]["tables"] if t["name"] == "L2Ingress.dmac")
    dmac_json["default_entry"]["action_const"] = True
    next(t for t in info.tables if t.preamble.id == DMAC).const_default_action_id = NOACTION
    client.set_pipeline(info, json.dumps(doc).encode())
    (err,) = write_error(client, update(MODIFY, table_entry=default_entry(FLOOD, (b"\x01",))))
    assert err[0] == 7
    (got,) = read_all(client, table_entry=pb.TableEntry(table_id=DMAC, is_default_action=True))
    assert got.table_entry.action.action.action_id == NOACTION


def test_const_table_is_permission_denied(client: SwitchClient, p4c_fixtures: Path) -> None:
    client.set_pipeline(*load(p4c_fixtures, "calc_state"))
    te = pb.TableEntry(table_id=CALC_OPS)
    te.match.add(field_id=1).exact.value = b"\x01"
    te.action.action.action_id = OP_ADD
    (err,) = write_error(client, update(INSERT, table_entry=te))
    assert err[0] == 7
    const = read_all(client, table_entry=pb.TableEntry(table_id=CALC_OPS))
    assert len(const) == 3 and all(e.table_entry.is_const for e in const)


def test_non_primary_write_is_permission_denied(l2: SwitchClient, server: tuple[Device, P4RuntimeServer]
                                                ) -> None:
    backup = p4rt_client(f"127.0.0.1:{server[1].port}", DEVICE_ID, election_id=3)
    try:
        backup.connect()
        assert backup.arbitration.status.code == 6   # ALREADY_EXISTS
        assert not backup.is_primary
        code, details = rpc_code(lambda: backup.write([update(INSERT, table_entry=dmac(b"\x01"))]))
        assert (code, details) == (grpc.StatusCode.PERMISSION_DENIED, "Not primary")
    finally:
        backup.close()


# ---------------------------------------------------------------- values and reads

def test_padded_values_accepted_and_read_back_canonical(l2: SwitchClient) -> None:
    l2.write([update(INSERT, table_entry=dmac(b"\x00\x00\x00\x00\x00\x2a", params=(b"\x00\x03",)))])
    (e,) = read_all(l2, table_entry=pb.TableEntry(table_id=DMAC))
    assert e.table_entry.match[0].exact.value == b"\x2a"
    assert e.table_entry.action.action.params[0].value == b"\x03"
    # The canonical and the padded spelling name the same entry.
    l2.write([update(DELETE, table_entry=dmac(b"\x2a", params=(b"\x03",)))])
    assert read_all(l2, table_entry=pb.TableEntry(table_id=DMAC)) == []


def test_wildcard_table_read_and_single_entry_read(l2: SwitchClient) -> None:
    l2.write([update(INSERT, table_entry=dmac(b"\x01")),
              update(INSERT, table_entry=dmac(b"\x02")),
              update(INSERT, table_entry=acl(b"\x07", b"\xff", 5, b"\x01", b"\x02"))])
    assert len(read_all(l2, table_entry=pb.TableEntry())) == 3          # table_id 0: all tables
    one = pb.TableEntry(table_id=DMAC)
    one.match.add(field_id=1).exact.value = b"\x02"
    (got,) = read_all(l2, table_entry=one)
    assert got.table_entry.match[0].exact.value == b"\x02"
    (a,) = read_all(l2, table_entry=pb.TableEntry(table_id=ACL))
    assert a.table_entry == acl(b"\x07", b"\xff", 5, b"\x01", b"\x02")   # written == read


def test_default_entry_read_and_modify(l2: SwitchClient) -> None:
    l2.write([update(MODIFY, table_entry=default_entry(FLOOD, (b"\x04",)))])
    (got,) = read_all(l2, table_entry=pb.TableEntry(table_id=DMAC, is_default_action=True))
    assert got.table_entry.action.action.action_id == FLOOD
    assert got.table_entry.action.action.params[0].value == b"\x04"


def test_default_entry_modify_without_action_resets_it(server: tuple[Device, P4RuntimeServer],
                                                       l2: SwitchClient) -> None:
    # P4Runtime: a MODIFY of the default entry with no action resets it to the program's
    # default (l2_mcast: replica_rewrite's is NoAction()); what client libraries' delete_all
    # sends.  Seen in packets: set_vlan(7) as default pushes a tag, the reset one does not.
    dev = server[0]
    rewrite = pb.TableEntry(table_id=REWRITE, is_default_action=True)
    set_vlan = pb.TableEntry()
    set_vlan.CopyFrom(rewrite)
    set_vlan.action.action.action_id = SET_VLAN
    set_vlan.action.action.params.add(param_id=1, value=b"\x07")
    l2.write([update(INSERT, table_entry=dmac(b"\x00\x00\x00\x00\x00\x05", FORWARD, (b"\x02",))),
              update(MODIFY, table_entry=set_vlan)])
    pkt = bytes.fromhex("000000000005" "0a0000000001" "0800") + b"p" * 30
    (out,) = dev.process(1, pkt)
    assert out == (2, pkt[:12] + b"\x81\x00\x00\x07" + pkt[12:])
    l2.write([update(MODIFY, table_entry=rewrite)])
    (got,) = read_all(l2, table_entry=rewrite)
    assert got.table_entry.action.action.action_id == NOACTION
    assert dev.process(1, pkt) == [(2, pkt)]


def test_replica_port_bytes_and_clone_sessions(l2: SwitchClient) -> None:
    l2.write([update(INSERT, packet_replication_engine_entry=group(2, (3, 1), (4, 1),
                                                                   use_port_bytes=True)),
              update(INSERT, packet_replication_engine_entry=group(9, (5, 0))),
              update(INSERT, packet_replication_engine_entry=clone(4, (6, 0), length=64))])
    groups = read_all(l2, packet_replication_engine_entry=group(0))
    assert [g.packet_replication_engine_entry.multicast_group_entry.multicast_group_id
            for g in groups] == [2, 9]
    reps = groups[0].packet_replication_engine_entry.multicast_group_entry.replicas
    assert [(r.egress_port, r.instance) for r in reps] == [(3, 1), (4, 1)]
    (cs,) = read_all(l2, packet_replication_engine_entry=clone(0))
    assert cs.packet_replication_engine_entry.clone_session_entry.packet_length_bytes == 64
    (err,) = write_error(l2, update(INSERT, packet_replication_engine_entry=group(2, (1, 1))))
    assert err[0] == 6


def test_direct_counter_write_and_read(l2: SwitchClient) -> None:
    l2.write([update(INSERT, table_entry=dmac(b"\x01")), update(INSERT, table_entry=dmac(b"\x02"))])
    dce = pb.DirectCounterEntry()
    dce.table_entry.CopyFrom(dmac(b"\x01"))
    dce.table_entry.ClearField("action")
    dce.data.packet_count, dce.data.byte_count = 5, 500
    l2.write([update(MODIFY, direct_counter_entry=dce)])
    every = pb.DirectCounterEntry()
    every.table_entry.table_id = DMAC
    got = {e.direct_counter_entry.table_entry.match[0].exact.value:
           e.direct_counter_entry.data.packet_count for e in read_all(l2, direct_counter_entry=every)}
    assert got == {b"\x01": 5, b"\x02": 0}
    # Also visible through a table read that asks for counter_data.
    req = pb.TableEntry(table_id=DMAC)
    req.counter_data.SetInParent()
    assert sorted(e.table_entry.counter_data.byte_count for e in read_all(l2, table_entry=req)) == \
        [0, 500]


def test_counter_and_register_entities(client: SwitchClient, p4c_fixtures: Path) -> None:
    client.set_pipeline(*load(p4c_fixtures, "calc_state"))
    client.write([update(MODIFY, counter_entry=counter(PER_OP, 2, packets=9))])
    cells = read_all(client, counter_entry=pb.CounterEntry())        # counter_id 0: all
    assert len(cells) == 16
    assert [c.counter_entry.data.packet_count for c in cells][2] == 9
    (err,) = write_error(client, update(MODIFY, counter_entry=counter(PER_OP, 16)))
    assert err[0] == 11                                                # OUT_OF_RANGE
    # Registers: an extra over PI (which answers UNIMPLEMENTED).
    reg = pb.RegisterEntry(register_id=ACC)
    reg.index.index = 7
    reg.data.CopyFrom(p4data_pb2.P4Data(bitstring=b"\x00\x00\x01\x00"))
    client.write([update(MODIFY, register_entry=reg)])
    one = pb.RegisterEntry(register_id=ACC)
    one.index.index = 7
    (got,) = read_all(client, register_entry=one)
    assert got.register_entry.data.bitstring == b"\x01\x00"
    assert len(read_all(client, register_entry=pb.RegisterEntry(register_id=ACC))) == 256


def test_read_of_unknown_id_is_invalid_argument(l2: SwitchClient) -> None:
    code, _ = rpc_code(lambda: read_all(l2, table_entry=pb.TableEntry(table_id=99)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    code, _ = rpc_code(lambda: read_all(l2, counter_entry=pb.CounterEntry(counter_id=5)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


# ---------------------------------------------------------------- device ids

def test_write_to_other_device_id(l2: SwitchClient) -> None:
    req = pb.WriteRequest(device_id=DEVICE_ID + 1)
    req.updates.append(update(INSERT, table_entry=dmac(b"\x01")))
    code, _ = rpc_code(lambda: l2.stub.Write(req))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    req.election_id.low = 10
    code, _ = rpc_code(lambda: l2.stub.Write(req))
    assert code == grpc.StatusCode.PERMISSION_DENIED


def test_big_wildcard_read_is_split_into_several_responses(l2: SwitchClient, p4c_fixtures: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import netsum.switch.p4rt.service as service_module
    # Replies are cut between read steps once ~READ_BYTES are gathered; a step encodes at
    # most 1024 entries, so with a 10 kB budget 2500 entries come as 1024 + 1024 + 452.
    monkeypatch.setattr(service_module, "READ_BYTES", 10_000)
    written = [dmac(k.to_bytes(2, "big")) for k in range(1, 2501)]
    l2.write([update(INSERT, table_entry=te) for te in written])
    e = pb.Entity()
    e.table_entry.table_id = DMAC
    responses = list(l2.stub.Read(pb.ReadRequest(device_id=DEVICE_ID, entities=[e])))
    assert [len(r.entities) for r in responses] == [1024, 1024, 452]
    got = sorted(int.from_bytes(x.table_entry.match[0].exact.value, "big")
                 for r in responses for x in r.entities)
    assert got == list(range(1, 2501))
    # An empty result is still one (empty) response, as PI sends.
    l2.set_pipeline(*load(p4c_fixtures, "l2_mcast"))
    assert len(list(l2.stub.Read(pb.ReadRequest(device_id=DEVICE_ID, entities=[e])))) == 1


def test_full_table_is_resource_exhausted(client: SwitchClient, p4c_fixtures: Path) -> None:
    info, js = load(p4c_fixtures, "l2_mcast")
    doc = json.loads(js)
    next(t for t in doc["pipelines"][0]["tables"] if t["name"] == "L2Ingress.dmac")["max_size"] = 2
    next(t for t in info.tables if t.preamble.id == DMAC).size = 2
    client.set_pipeline(info, json.dumps(doc).encode())
    errs = write_error(client, *(update(INSERT, table_entry=dmac(bytes([k]))) for k in (1, 2, 3)))
    assert [c for c, _ in errs] == [0, 0, 8]


def test_reconcile_that_does_not_fit_keeps_the_old_pipeline_and_state(
        l2: SwitchClient, p4c_fixtures: Path, server: tuple[Device, P4RuntimeServer]) -> None:
    l2.write([update(INSERT, table_entry=dmac(b"\x01")),
              update(INSERT, packet_replication_engine_entry=group(3, (1, 1)))])
    # A new program whose dmac no longer offers `forward`: the entry cannot be replayed.
    info, js = load(p4c_fixtures, "l2_mcast")
    doc = json.loads(js)
    t = next(t for t in doc["pipelines"][0]["tables"] if t["name"] == "L2Ingress.dmac")
    i = t["actions"].index("L2Ingress.forward")
    del t["actions"][i], t["action_ids"][i]
    t["next_tables"] = {k: v for k, v in t["next_tables"].items() if k != "L2Ingress.forward"}
    p4_dmac = next(t for t in info.tables if t.preamble.id == DMAC)
    keep = [r for r in p4_dmac.action_refs if r.id != FORWARD]
    del p4_dmac.action_refs[:]
    p4_dmac.action_refs.extend(keep)
    code, details = rpc_code(lambda: l2.set_pipeline(info, json.dumps(doc).encode(),
                                                     action=Cfg.RECONCILE_AND_COMMIT, cookie=9))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "RECONCILE" in details
    # Still the old program, with its state.
    assert l2.get_config().p4info.tables[0].action_refs[0].id == FORWARD
    assert len(read_all(l2, table_entry=pb.TableEntry(table_id=DMAC))) == 1
    assert len(read_all(l2, packet_replication_engine_entry=group(0))) == 1
    frame = bytes.fromhex("000000000001" "0000000000aa" "0800") + b"x" * 46
    assert [port for port, _ in server[0].process(2, frame)] == [1]


def test_lpm_entries_written_the_tutorials_way(client: SwitchClient, p4c_fixtures: Path,
                                               server: tuple[Device, P4RuntimeServer]) -> None:
    """p4lang tutorials' p4runtime_lib sends values zero-padded to the field width; dmac is
    turned into an LPM table here (neither fixture has one)."""
    info, js = load(p4c_fixtures, "l2_mcast")
    doc = json.loads(js)
    t = next(t for t in doc["pipelines"][0]["tables"] if t["name"] == "L2Ingress.dmac")
    t["match_type"] = t["key"][0]["match_type"] = "lpm"
    next(t for t in info.tables if t.preamble.id == DMAC).match_fields[0].match_type = \
        p4info_pb2.MatchField.LPM

    def lpm(value: bytes, plen: int, port: int) -> pb.Update:
        te = pb.TableEntry(table_id=DMAC)
        m = te.match.add(field_id=1)
        m.lpm.value, m.lpm.prefix_len = value, plen
        te.action.action.action_id = FORWARD
        te.action.action.params.add(param_id=1, value=port.to_bytes(2, "big"))
        return update(INSERT, table_entry=te)

    client.set_pipeline(info, json.dumps(doc).encode())
    client.write([lpm(bytes.fromhex("0a0b0c000000"), 24, 2),
                  lpm(bytes.fromhex("0a0b0c000005"), 48, 3)])
    (err,) = write_error(client, lpm(bytes.fromhex("0a0b0c000001"), 24, 4))   # bits past /24
    assert err[0] == 3
    got = sorted((e.table_entry.match[0].lpm.prefix_len, e.table_entry.match[0].lpm.value)
                 for e in read_all(client, table_entry=pb.TableEntry(table_id=DMAC)))
    assert got == [(24, bytes.fromhex("0a0b0c000000")), (48, bytes.fromhex("0a0b0c000005"))]
    dev = server[0]
    rest = bytes.fromhex("0000000000aa0800") + b"x" * 46
    assert [p for p, _ in dev.process(1, bytes.fromhex("0a0b0c000005") + rest)] == [3]
    assert [p for p, _ in dev.process(1, bytes.fromhex("0a0b0c0000ff") + rest)] == [2]


def test_value_set_members_over_grpc(client: SwitchClient, server: tuple[Device, P4RuntimeServer]
                                     ) -> None:
    # Real p4c output of tests/switch_p4/value_sets.p4: h.t in value set `one` extracts g and
    # sends the packet to port 2 (h.x = g.y); otherwise port 1.
    where = Path(__file__).resolve().parents[1] / "switch_p4" / "p4c"
    client.set_pipeline(*load(where, "value_sets"))
    one = pb.ValueSetEntry(value_set_id=56408685)
    one.members.add().match.add(field_id=1).exact.value = b"\x00\x12\x34"
    client.write([update(MODIFY, value_set_entry=one)])
    (got,) = read_all(client, value_set_entry=pb.ValueSetEntry(value_set_id=56408685))
    assert got.value_set_entry.members[0].match[0].exact.value == b"\x12\x34"
    pkt = b"\x12\x34\x01\x99tail"
    assert server[0].process(0, pkt) == [(2, b"\x12\x34\x99\x99tail")]
    (err,) = write_error(client, update(INSERT, value_set_entry=one))
    assert err[0] == 3 and "only MODIFY" in err[1]                  # INVALID_ARGUMENT
