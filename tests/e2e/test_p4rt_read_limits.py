"""Reads that cannot starve the server, and P4Runtime over TLS (issue 25 point 5).

A program with one 2^20-cell register makes a wildcard read ~14 MB of ReadResponses, more than
gRPC's flow-control window: a client that opens such reads and never consumes them holds them
open on the server.  At most MAX_READS (8) are served at once; the others are refused with
RESOURCE_EXHAUSTED, and Writes keep being answered (they used to wait behind 40 such reads
until DEADLINE_EXCEEDED).  TLS: a server started with a certificate answers a client that
trusts it and refuses a plaintext client.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc as pb_grpc

from helpers import p4rt_client
from netsum import p4c as compiler
from netsum.p4rt.errors import ClientError
from netsum.switch.device import Device
from netsum.switch.p4rt.server import MAX_READS, P4RuntimeServer, TlsConfig

BIG_REGISTER_P4 = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<32> idx; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    register<bit<32>>(1048576) big;
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table t { key = { h.h.idx: exact; } actions = { fwd; NoAction; } default_action = NoAction(); }
    apply { big.write(h.h.idx & 0xFFFFF, h.h.idx); t.apply(); }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def _insert(info: object, key: int) -> pb.Update:
    table = info.tables[0]                       # type: ignore[attr-defined]
    action = next(a for a in info.actions if a.preamble.name == "I.fwd")  # type: ignore
    u = pb.Update(type=pb.Update.INSERT)
    te = u.entity.table_entry
    te.table_id = table.preamble.id
    te.match.add(field_id=1).exact.value = key.to_bytes(4, "big")
    te.action.action.action_id = action.preamble.id
    te.action.action.params.add(param_id=1, value=b"\x02")
    return u


@pytest.mark.slow
def test_unconsumed_reads_are_capped_and_writes_still_served() -> None:
    res = compiler.compile_source(BIG_REGISTER_P4)
    srv = P4RuntimeServer(Device(device_id=0), "127.0.0.1:0").start()
    try:
        with p4rt_client(f"127.0.0.1:{srv.port}", 0, election_id=1) as c:
            c.connect()
            c.set_pipeline(res.p4info, res.json_text().encode())
            # One channel per reader (readers sharing a connection also share its HTTP/2
            # window, which serializes their first responses).
            readers = [grpc.insecure_channel(f"127.0.0.1:{srv.port}")
                       for _ in range(MAX_READS + 4)]
            wildcard = pb.ReadRequest(device_id=0, entities=[
                pb.Entity(register_entry=pb.RegisterEntry())])
            # Responses taken as bytes: decoding 1 MB with pure-Python protobuf takes seconds.
            calls = [ch.unary_stream("/p4.v1.P4Runtime/Read",
                                     request_serializer=pb.ReadRequest.SerializeToString,
                                     response_deserializer=lambda b: b)(wildcard)
                     for ch in readers]
            refused = served = 0
            for call in calls:
                try:
                    first = next(call)              # then never consumed further
                    assert len(first) > 500_000         # ~1 MB of register entities
                    served += 1
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc
                    assert "Too many Reads" in (exc.details() or "")
                    refused += 1
            assert (served, refused) == (MAX_READS, 4)
            # Writes are answered while the readers stall (a generous deadline: any answer
            # at all shows a thread was free; before the cap none was).
            for key in range(20):
                req = c.stamp(pb.WriteRequest(updates=[_insert(res.p4info, key)]))
                c.stub.Write(req, timeout=30)
            for call in calls:
                call.cancel()
            for ch in readers:
                ch.close()
            # Once the stalled reads are gone, reads are served again (the seats come back as
            # the server notices the cancellations) and find every entry written meanwhile.
            deadline = time.monotonic() + 60
            while True:
                try:
                    entries = c.read([pb.Entity(table_entry=pb.TableEntry())])
                    break
                except ClientError as exc:
                    assert exc.code == "RESOURCE_EXHAUSTED"
                    assert time.monotonic() < deadline, "read seats never came back"
                    time.sleep(0.2)
            assert len(entries) == 20
    finally:
        srv.stop(None)


def _cert(tmp: Path) -> tuple[Path, Path]:
    key, cert = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return key, cert


def test_tls_server_answers_a_trusting_client_and_refuses_plaintext(tmp_path: Path) -> None:
    try:
        key, cert = _cert(tmp_path)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"openssl cannot make a test certificate: {exc}")
    srv = P4RuntimeServer(Device(device_id=0), "127.0.0.1:0", tls=TlsConfig(cert, key)).start()
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(f"localhost:{srv.port}", creds) as ch:
            reply = pb_grpc.P4RuntimeStub(ch).Capabilities(pb.CapabilitiesRequest(), timeout=10)
            assert reply.p4runtime_api_version == "1.3.0"
        with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
            with pytest.raises(grpc.RpcError) as exc:
                pb_grpc.P4RuntimeStub(ch).Capabilities(pb.CapabilitiesRequest(), timeout=5)
            assert exc.value.code() in (grpc.StatusCode.UNAVAILABLE,
                                        grpc.StatusCode.DEADLINE_EXCEEDED)
    finally:
        srv.stop(None)
