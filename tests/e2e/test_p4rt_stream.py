"""StreamChannel end to end: two controllers (only the primary writes; failover when it goes
away), arbitration refusals that end the stream, and packet I/O through the CPU port.  The
controllers are the client library's SwitchClient; messages on the stream are sent and read
through its `Stream`."""
from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from helpers import p4rt_client
from netsum.p4rt.client import Stream, SwitchClient
from netsum.p4rt.errors import ClientError, SwitchUnreachable
from netsum.switch.device import Device
from netsum.switch.p4rt import P4RuntimeServer

DEVICE_ID = 1
CPU_PORT = 64
DMAC, FORWARD = 36472220, 25122418
OK, ALREADY_EXISTS = 0, 6

# p4c's rendering of `@controller_header("packet_out") header { bit<9> egress_port; bit<7> _pad; }`
# and the packet_in twin: the server only needs the P4Info side.
PACKET_HEADERS = """
controller_packet_metadata { preamble { id: 67121543 name: "packet_out" alias: "packet_out" }
  metadata { id: 1 name: "egress_port" bitwidth: 9 } metadata { id: 2 name: "_pad" bitwidth: 7 } }
controller_packet_metadata { preamble { id: 67146229 name: "packet_in" alias: "packet_in" }
  metadata { id: 1 name: "ingress_port" bitwidth: 9 } metadata { id: 2 name: "_pad" bitwidth: 7 } }
"""


@pytest.fixture
def switch() -> Iterator[tuple[Device, P4RuntimeServer, list[tuple[int, bytes]]]]:
    dev = Device(device_id=DEVICE_ID, cpu_port=CPU_PORT)
    sent: list[tuple[int, bytes]] = []
    dev.transmit = lambda port, frame: sent.append((port, frame))
    srv = P4RuntimeServer(dev, "127.0.0.1:0").start()
    try:
        yield dev, srv, sent
    finally:
        srv.stop(None)


def pipeline(fixtures: Path) -> tuple[p4info_pb2.P4Info, bytes]:
    info = text_format.Parse((fixtures / "l2_mcast.p4info.txtpb").read_text() + PACKET_HEADERS,
                             p4info_pb2.P4Info())
    return info, (fixtures / "l2_mcast.json").read_bytes()


def client(srv: P4RuntimeServer, election_id: int, device_id: int = DEVICE_ID) -> SwitchClient:
    return p4rt_client(f"127.0.0.1:{srv.port}", device_id, election_id)


def forward(dst: bytes, port: int) -> pb.Update:
    u = pb.Update(type=pb.Update.INSERT)
    te = u.entity.table_entry
    te.table_id = DMAC
    te.match.add(field_id=1).exact.value = dst
    te.action.action.action_id = FORWARD
    te.action.action.params.add(param_id=1, value=port.to_bytes(2, "big"))
    return u


def next_of(stream: Stream, kind: str, timeout: float = 2.0) -> pb.StreamMessageResponse:
    while True:
        msg = stream.recv(timeout)
        assert msg is not None, f"stream ended: {stream.error}"
        if msg.WhichOneof("update") == kind:
            return msg


def arbitration_status(stream: Stream) -> tuple[int, int]:
    msg = next_of(stream, "arbitration")
    return msg.arbitration.status.code, msg.arbitration.election_id.low


def test_only_primary_writes_and_failover_on_disconnect(switch: tuple, p4c_fixtures: Path) -> None:
    _, srv, _ = switch
    a, b = client(srv, 20), client(srv, 10)
    try:
        a.connect()
        b.connect()
        assert a.arbitration.status.code == OK and a.is_primary
        assert b.arbitration.status.code == ALREADY_EXISTS and not b.is_primary
        a.set_pipeline(*pipeline(p4c_fixtures))
        with pytest.raises(ClientError) as err:
            b.set_pipeline(*pipeline(p4c_fixtures))
        assert err.value.code == "PERMISSION_DENIED"
        a.write([forward(b"\x01", 2)])
        with pytest.raises(ClientError) as err:
            b.write([forward(b"\x02", 2)])
        assert (err.value.code, err.value.detail) == ("PERMISSION_DENIED", "Not primary")
        # Both may read.
        entity = pb.Entity()
        entity.table_entry.SetInParent()
        assert len(b.read([entity])) == 1
        # The primary goes away: the backup is told it is primary now, and can write.
        a.close()
        assert b.stream is not None
        assert arbitration_status(b.stream) == (OK, 10)
        b.write([forward(b"\x02", 2)])
        assert len(b.read([entity])) == 2
    finally:
        a.close()
        b.close()


def test_higher_election_id_takes_over_and_all_are_notified(switch: tuple) -> None:
    _, srv, _ = switch
    a, b = client(srv, 5), client(srv, 9)
    try:
        a.connect()
        b.connect()
        assert a.stream is not None
        assert arbitration_status(a.stream) == (ALREADY_EXISTS, 9)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("device_id,election_id,code", [
    (DEVICE_ID + 1, 3, grpc.StatusCode.FAILED_PRECONDITION),
    (DEVICE_ID, 7, grpc.StatusCode.INVALID_ARGUMENT),          # 7 is taken by the first client
])
def test_refused_arbitration_ends_the_stream(switch: tuple, p4c_fixtures: Path, device_id: int,
                                             election_id: int, code: grpc.StatusCode) -> None:
    _, srv, _ = switch
    first = client(srv, 7)
    other = client(srv, election_id, device_id)
    try:
        first.connect()
        with pytest.raises(SwitchUnreachable) as err:  # stream closed instead of an answer
            other.connect(retry=False)
        assert err.value.code == code.name
        # The first client is unaffected: still primary.
        first.set_pipeline(*pipeline(p4c_fixtures))
    finally:
        first.close()
        other.close()


def test_device_id_change_on_a_stream_is_failed_precondition(switch: tuple) -> None:
    _, srv, _ = switch
    c = client(srv, 4)
    try:
        c.connect()
        assert c.stream is not None
        c.stream.arbitrate(DEVICE_ID + 5, 4)
        while (msg := c.stream.recv()) is not None:
            pass
        assert c.stream.error is not None
        assert c.stream.error.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        c.close()


def test_packet_out_prepends_metadata_and_enters_on_cpu_port(switch: tuple, p4c_fixtures: Path
                                                             ) -> None:
    _, srv, sent = switch
    c = client(srv, 1)
    try:
        c.connect()
        c.set_pipeline(*pipeline(p4c_fixtures))
        header = (0x1AB << 7).to_bytes(2, "big")          # egress_port = 0x1ab, _pad = 0
        payload = bytes.fromhex("0a0b0c0d") + b"\x00" * 60
        # The program sees header + payload: its "destination MAC" is the first 6 bytes.
        c.write([forward(header + payload[:4], 3)])
        msg = pb.StreamMessageRequest()
        msg.packet.payload = payload
        msg.packet.metadata.add(metadata_id=1, value=b"\x01\xab")
        assert c.stream is not None
        c.stream.send(msg)
        deadline = time.monotonic() + 2
        while not sent and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sent == [(3, header + payload)]
    finally:
        c.close()


def test_packet_in_goes_to_the_primary_with_metadata(switch: tuple, p4c_fixtures: Path) -> None:
    dev, srv, _ = switch
    primary, backup = client(srv, 8), client(srv, 2)
    try:
        primary.connect()
        backup.connect()
        primary.set_pipeline(*pipeline(p4c_fixtures))
        primary.write([forward(b"\x00\x00\x00\x00\x00\x42", CPU_PORT)])
        frame = bytes.fromhex("000000000042") + bytes.fromhex("0000000000aa") + b"\x08\x00" + \
            b"p" * 50
        dev.receive(5, frame)
        assert primary.stream is not None and backup.stream is not None
        msg = next_of(primary.stream, "packet").packet
        # The first 16 bits of the frame are the packet_in header: 9 + 7 bits, both 0 here.
        assert [(m.metadata_id, m.value) for m in msg.metadata] == [(1, b"\x00"), (2, b"\x00")]
        assert msg.payload == frame[2:]
        with pytest.raises(queue.Empty):
            next_of(backup.stream, "packet", timeout=0.3)
    finally:
        primary.close()
        backup.close()


@pytest.mark.parametrize("election_id,metadata,code", [
    (1, [(9, b"\x01")], 3),             # unknown metadata id: INVALID_ARGUMENT
    (1, [(1, b"\x02\x00")], 3),         # 512 does not fit 9 bits
    (None, [(1, b"\x01")], 7),          # from a backup: PERMISSION_DENIED
])
def test_bad_packet_out_gets_a_stream_error(switch: tuple, p4c_fixtures: Path,
                                            election_id: int | None,
                                            metadata: list[tuple[int, bytes]], code: int) -> None:
    _, srv, sent = switch
    primary = client(srv, 50)
    backup = client(srv, 1)
    try:
        primary.connect()
        backup.connect()
        primary.set_pipeline(*pipeline(p4c_fixtures))
        sender = primary if election_id is not None else backup
        msg = pb.StreamMessageRequest()
        msg.packet.payload = b"\xff" * 60
        for mid, value in metadata:
            msg.packet.metadata.add(metadata_id=mid, value=value)
        assert sender.stream is not None
        sender.stream.send(msg)
        err = next_of(sender.stream, "error").error
        assert err.canonical_code == code and err.message
        assert err.packet_out.packet_out.payload == msg.packet.payload
        assert sent == []
    finally:
        primary.close()
        backup.close()


def test_role_name_is_unimplemented(switch: tuple) -> None:
    _, srv, _ = switch
    s = Stream(client(srv, 1).stub)
    try:
        s.arbitrate(DEVICE_ID, 3, role="p4rt-role")
        assert s.recv() is None
        assert s.error is not None and s.error.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        s.close()


def test_seventeenth_stream_is_resource_exhausted(switch: tuple) -> None:
    _, srv, _ = switch
    clients = [client(srv, i + 1) for i in range(17)]
    try:
        for c in clients[:16]:
            c.connect()
            assert c.arbitration is not None
        with pytest.raises(SwitchUnreachable) as err:
            clients[16].connect()
        assert err.value.code == "RESOURCE_EXHAUSTED"
    finally:
        for c in clients:
            c.close()
