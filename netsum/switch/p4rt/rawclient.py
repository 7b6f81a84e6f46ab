"""A minimal P4Runtime client on the raw stubs, for tests, benchmarks and smoke checks.

Unlike p4runtime-shell it has no module-global state, never calls sys.exit, and exposes what a
server test needs to see: every StreamChannel message, and a failed Write's per-update errors
decoded from `grpc-status-details-bin` (p4runtime-shell 0.0.6 loops forever on a partly failed
batch).
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

__all__ = ["RawClient", "Stream", "WriteError", "batch_errors"]


@dataclass(frozen=True, slots=True)
class WriteError:
    """One update's outcome in a failed batch: google.rpc code (0 = OK) and message."""
    code: int
    message: str
    space: str


def batch_errors(exc: grpc.RpcError) -> list[WriteError]:
    """The per-update p4.v1.Error list of a failed Write ([] if the status has no details)."""
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            out = []
            for detail in status.details:
                err = p4runtime_pb2.Error()
                detail.Unpack(err)
                out.append(WriteError(err.canonical_code, err.message, err.space))
            return out
    return []


class Stream:
    """One StreamChannel: send messages, receive them from a queue."""

    def __init__(self, stub: p4runtime_pb2_grpc.P4RuntimeStub) -> None:
        self._out: queue.Queue[Any] = queue.Queue()
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.error: grpc.RpcError | None = None
        self._call = stub.StreamChannel(self._requests())
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _requests(self) -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        while True:
            item = self._out.get()
            if item is None:
                return
            yield item

    def _pump(self) -> None:
        try:
            for msg in self._call:
                self.inbox.put(msg)
        except grpc.RpcError as exc:
            self.error = exc
        self.inbox.put(None)   # end of stream

    def send(self, msg: p4runtime_pb2.StreamMessageRequest) -> None:
        self._out.put(msg)

    def arbitrate(self, device_id: int, election_id: int, role: str | None = None) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.high = election_id >> 64
        req.arbitration.election_id.low = election_id & ((1 << 64) - 1)
        if role is not None:
            req.arbitration.role.name = role
        self.send(req)

    def recv(self, timeout: float = 2.0) -> p4runtime_pb2.StreamMessageResponse | None:
        """Next message; None when the stream ended (see `.error`).  Raises queue.Empty on
        timeout."""
        return self.inbox.get(timeout=timeout)

    def close(self) -> None:
        self._out.put(None)
        self._call.cancel()
        self._thread.join(timeout=5)


class RawClient:
    def __init__(self, address: str, device_id: int = 0, election_id: int | None = 1) -> None:
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.device_id = device_id
        self.election_id = election_id
        self.stream: Stream | None = None

    def connect(self, timeout: float = 2.0) -> p4runtime_pb2.StreamMessageResponse | None:
        """Open a StreamChannel, arbitrate, return the server's first reply."""
        assert self.election_id is not None
        self.stream = Stream(self.stub)
        self.stream.arbitrate(self.device_id, self.election_id)
        return self.stream.recv(timeout)

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
        self.channel.close()

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _stamp(self, req: Any) -> Any:
        req.device_id = self.device_id
        if self.election_id is not None:
            req.election_id.high = self.election_id >> 64
            req.election_id.low = self.election_id & ((1 << 64) - 1)
        return req

    def set_pipeline(self, p4info: Any, device_config: bytes, action: int =
                     p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                     cookie: int | None = None) -> None:
        req = self._stamp(p4runtime_pb2.SetForwardingPipelineConfigRequest(action=action))
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        if cookie is not None:
            req.config.cookie.cookie = cookie
        self.stub.SetForwardingPipelineConfig(req)

    def get_pipeline(self, response_type: int = 0) -> p4runtime_pb2.ForwardingPipelineConfig:
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=self.device_id,
                                                               response_type=response_type)
        return self.stub.GetForwardingPipelineConfig(req).config

    def write(self, updates: Iterable[p4runtime_pb2.Update], atomicity: int = 0) -> None:
        req = self._stamp(p4runtime_pb2.WriteRequest(atomicity=atomicity))
        req.updates.extend(updates)
        self.stub.Write(req)

    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        return [e for resp in self.stub.Read(req) for e in resp.entities]
