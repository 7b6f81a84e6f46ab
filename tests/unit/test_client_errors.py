"""The client library's one batch-error decoder and its one translation of gRPC errors.

The statuses are built here as the P4Runtime spec (§12.3) and PI lay them out: a
google.rpc.Status in the `grpc-status-details-bin` trailer with one p4.v1.Error per update, in
order, OK for the updates that were applied (the mixed batch p4runtime-shell 0.0.6 loops on).
`FakeRpcError` stands in for grpc's call object, next to the one function that reads it; the
same decoding against the real server is in tests/e2e/test_p4rt_raw.py and below.
"""
from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2 as pb

from helpers import embedded_server, p4rt_client
from netsum.match import Exact
from netsum.p4rt.entities import DELETE, INSERT, TableEntry, update
from netsum.p4rt.errors import (NotPrimary, P4RuntimeError, PipelineMissing, SwitchUnreachable,
                                UpdateStatus, decode_batch, rpc_error)
from netsum.p4rt.schema import Schema, load_p4info

SPACE = "ALL-sswitch-p4org"


def trailer(*details: tuple[int, str] | any_pb2.Any) -> list[tuple[str, bytes]]:
    status = status_pb2.Status(code=code_pb2.UNKNOWN)
    for d in details:
        if isinstance(d, any_pb2.Any):
            status.details.append(d)
        else:
            status.details.add().Pack(pb.Error(canonical_code=d[0], message=d[1], space=SPACE))
    return [("content-type", b"application/grpc"),
            ("grpc-status-details-bin", status.SerializeToString())]


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str,
                 metadata: list[tuple[str, bytes]] | None = None) -> None:
        self._code, self._details, self._metadata = code, details, metadata

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> list[tuple[str, bytes]] | None:
        return self._metadata


MIXED = trailer((code_pb2.OK, ""), (code_pb2.ALREADY_EXISTS, "Match entry exists"),
                (code_pb2.OK, ""), (code_pb2.NOT_FOUND, "Cannot find match entry"))


def test_a_mixed_batch_keeps_every_update_in_order() -> None:
    got = decode_batch(MIXED)
    assert got == (UpdateStatus(0, code_pb2.OK, "", SPACE),
                   UpdateStatus(1, code_pb2.ALREADY_EXISTS, "Match entry exists", SPACE),
                   UpdateStatus(2, code_pb2.OK, "", SPACE),
                   UpdateStatus(3, code_pb2.NOT_FOUND, "Cannot find match entry", SPACE))
    assert [s.ok for s in got] == [True, False, True, False]
    assert [s.code_name for s in got] == ["OK", "ALREADY_EXISTS", "OK", "NOT_FOUND"]


def test_a_detail_that_is_not_a_p4_error_is_a_failure_at_its_index() -> None:
    other = any_pb2.Any()
    other.Pack(status_pb2.Status(code=5))
    got = decode_batch(trailer((code_pb2.OK, ""), other))
    assert [(s.index, s.code_name) for s in got] == [(0, "OK"), (1, "UNKNOWN")]
    assert "google.rpc.Status" in got[1].message


@pytest.mark.parametrize("metadata", [
    None, [], [("grpc-status-details-bin", b"")], [("grpc-status-details-bin", b"\xff\xff\x01")],
])
def test_no_or_mangled_details_decode_to_nothing(metadata: list[tuple[str, bytes]] | None) -> None:
    assert decode_batch(metadata) == ()


def _err(rpc: str, code: grpc.StatusCode, details: str,
         metadata: list[tuple[str, bytes]] | None = None) -> Exception:
    return rpc_error(rpc, FakeRpcError(code, details, metadata), "127.0.0.1:9 (device 0)",
                     (0, 3), 5.0)


def test_a_partly_failed_write_names_each_failed_update() -> None:
    exc = _err("Write", grpc.StatusCode.UNKNOWN, "", MIXED)
    assert isinstance(exc, P4RuntimeError)
    assert str(exc) == ("Write failed: update 1: ALREADY_EXISTS Match entry exists; "
                        "update 3: NOT_FOUND Cannot find match entry")
    assert [f.index for f in exc.failures] == [1, 3] and len(exc.statuses) == 4
    assert (exc.rpc, exc.code) == ("Write", "UNKNOWN")


@pytest.mark.parametrize("rpc, code, details, metadata, kind, fragment", [
    ("Read", grpc.StatusCode.UNAVAILABLE, "Connection refused", None, SwitchUnreachable,
     "switch 127.0.0.1:9 (device 0) is unreachable (Read: Connection refused)"),
    ("Write", grpc.StatusCode.DEADLINE_EXCEEDED, "", None, SwitchUnreachable,
     "did not answer Write within 5 s"),
    ("Write", grpc.StatusCode.PERMISSION_DENIED, "Not primary", None, NotPrimary,
     "(election id 0,3) is not the primary"),
    ("Write", grpc.StatusCode.UNKNOWN, "", trailer((code_pb2.PERMISSION_DENIED, "Not primary")),
     NotPrimary, "not the primary controller (Not primary)"),
    ("Read", grpc.StatusCode.FAILED_PRECONDITION,
     "No forwarding pipeline config set for this device", None, PipelineMissing,
     "push one first"),
    ("Read", grpc.StatusCode.INVALID_ARGUMENT, "Invalid table id", MIXED, P4RuntimeError,
     "Read failed: INVALID_ARGUMENT Invalid table id"),
])
def test_codes_with_a_meaning_get_their_own_type(rpc: str, code: grpc.StatusCode, details: str,
                                                 metadata: list[tuple[str, bytes]] | None,
                                                 kind: type[Exception], fragment: str) -> None:
    exc = _err(rpc, code, details, metadata)
    assert type(exc) is kind and fragment in str(exc), exc
    # Whatever the type, the status itself stays readable; only a Write has per-update ones.
    assert (exc.rpc, exc.code, exc.detail) == (rpc, code.name, details)  # type: ignore[attr-defined]
    assert bool(exc.statuses) == (rpc == "Write" and metadata is not None)  # type: ignore[attr-defined]


def test_the_real_server_s_mixed_batch_through_the_client(p4c_fixtures: Path) -> None:
    """PI-style details from netsum-switch, typed entities in, the failed indices out."""
    info = load_p4info(p4c_fixtures / "l2_mcast.p4info.txtpb")
    schema = Schema(info)

    def fwd(mac: int) -> TableEntry:
        return TableEntry("L2Ingress.dmac", (("hdr.eth.dst", Exact(mac)),), "L2Ingress.forward",
                          (1,))
    with embedded_server(0) as (_, srv):
        with p4rt_client(f"127.0.0.1:{srv.port}") as c:
            c.connect()
            c.set_pipeline(info, (p4c_fixtures / "l2_mcast.json").read_bytes())
            with pytest.raises(P4RuntimeError) as err:
                c.write([update(INSERT, fwd(1), schema), update(INSERT, fwd(1), schema),
                         update(INSERT, fwd(2), schema), update(DELETE, fwd(3), schema)])
            assert [(s.index, s.code_name) for s in err.value.statuses] == \
                [(0, "OK"), (1, "ALREADY_EXISTS"), (2, "OK"), (3, "NOT_FOUND")]
            assert str(err.value).startswith("Write failed: update 1: ALREADY_EXISTS")
            assert len(c.read([pb.Entity(table_entry=pb.TableEntry(table_id=36472220))])) == 2
