"""The P4Runtime session with one switch: channel, StreamChannel, arbitration and the RPCs.

`SwitchClient` holds its own channel and stream (no module-global state, so one process drives
several switches at once) and never exits the process.  Requests and replies are the protobuf
messages: the typed entities (`entities`, `pre`, `cells`) encode to them, and tests can send
anything they like, including malformed requests.  Every failed RPC goes through
`errors.rpc_error`, the one place where gRPC errors become the library's; `stub` and `Stream`
are the raw layer below for whoever must see gRPC itself (a server's tests).

The handshake (spec §5.3): an arbitration request on a new stream, then the first arbitration
reply, whose status says primary (OK) or backup.  A server that refuses the election id ends
the stream with a status, reported as `SwitchUnreachable` naming it.
"""
from __future__ import annotations

import json
import queue
import random
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from netsum.p4rt.errors import ClientError, PipelineMissing, SwitchUnreachable, rpc_error

__all__ = ["Endpoint", "Stream", "SwitchClient", "call_json"]

#: gRPC channel options every session gets unless it gives its own: replies up to 256 MB, as
#: PI's server sends (a GetForwardingPipelineConfig of netsum.p4 at K >= 1024 is over gRPC's
#: default 4 MB).
DEFAULT_OPTIONS: tuple[tuple[str, Any], ...] = (("grpc.max_receive_message_length", 256 << 20),)

_FWD = p4runtime_pb2.SetForwardingPipelineConfigRequest
_GET = p4runtime_pb2.GetForwardingPipelineConfigRequest


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a switch's P4Runtime server is and who we are to it.

    Both ids are explicit because the usual defaults disagree (simple_switch_grpc's device id is
    0, p4runtime-shell's is 1) and a wrong one fails late and obscurely.  `election_id` None
    sends requests without one (PI then accepts writes only while no stream is open)."""
    address: str
    device_id: int
    election_id: tuple[int, int] | None = (0, 1)
    role: str | None = None

    def __str__(self) -> str:
        return f"{self.address} (device {self.device_id})"


def election(value: int | tuple[int, int]) -> tuple[int, int]:
    """A 128-bit election id as (high, low)."""
    if isinstance(value, tuple):
        return value
    return value >> 64, value & ((1 << 64) - 1)


class Stream:
    """One StreamChannel: messages out through a queue, messages in on `inbox` (None once the
    stream ended; `error` then holds the server's status, if it ended with one)."""

    def __init__(self, stub: p4runtime_pb2_grpc.P4RuntimeStub) -> None:
        self._out: queue.Queue[Any] = queue.Queue()
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.error: grpc.RpcError | None = None
        self._call = stub.StreamChannel(self._requests())
        # A daemon: a stream its owner forgot to close must not keep the interpreter alive.
        self._thread = threading.Thread(target=self._pump, daemon=True,
                                        name="p4rt-stream")
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

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._call.done()

    def send(self, msg: p4runtime_pb2.StreamMessageRequest) -> None:
        self._out.put(msg)

    def arbitrate(self, device_id: int, election_id: int | tuple[int, int],
                  role: str | None = None) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.high, req.arbitration.election_id.low = election(election_id)
        if role is not None:
            req.arbitration.role.name = role
        self.send(req)

    def recv(self, timeout: float = 2.0) -> p4runtime_pb2.StreamMessageResponse | None:
        """Next message; None when the stream ended (see `.error`).  Raises queue.Empty on
        timeout."""
        return self.inbox.get(timeout=timeout)

    def failure(self) -> tuple[str, str, str]:
        """Why the stream ended: (reason, status code name, message) from the server's status,
        if it gave one."""
        exc = self.error
        if exc is not None and hasattr(exc, "code"):
            code = exc.code()
            name = code.name if code is not None else ""
            detail = exc.details() or ""
            return f"{name} {detail}".strip(), name, detail
        return "no arbitration reply", "", ""

    def close(self) -> None:
        self._out.put(None)
        self._call.cancel()
        self._thread.join(timeout=5)


def _close_at_exit(client: "SwitchClient") -> None:
    """Close a session its owner forgot, before interpreter exit tears gRPC down under the
    stream's thread (`threading._register_atexit` runs before threads are joined and atexit
    handlers run).  A weak reference keeps closed clients collectable."""
    register = getattr(threading, "_register_atexit", None)
    if register is None:
        return
    ref = weakref.ref(client)

    def close() -> None:
        c = ref()
        if c is not None:
            c.close()

    try:
        register(close)
    except RuntimeError:  # already shutting down
        pass


class SwitchClient:
    """One P4Runtime session (channel + stream + arbitration) with one switch.  `timeout` bounds
    each RPC (None: no deadline)."""

    arbitration_timeout: float = 2.0

    def __init__(self, endpoint: Endpoint, timeout: float | None = 5.0,
                 options: Sequence[tuple[str, Any]] = ()) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        given = {name for name, _ in options}
        self.options = [o for o in DEFAULT_OPTIONS if o[0] not in given] + list(options)
        self.stream: Stream | None = None
        #: The arbitration reply of the last `connect` (None before, or without one).
        self.arbitration: Any = None
        self._channel: grpc.Channel | None = grpc.insecure_channel(endpoint.address,
                                                                   options=self.options)
        self._stub: Any = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        self._exit_hook = False

    def __enter__(self) -> "SwitchClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- session ------------------------------------------------------------------------------
    def connect(self, timeout: float | None = None, retry: bool = True) -> None:
        """Open the stream and arbitrate; `arbitration` holds the reply.  Raises
        SwitchUnreachable (its `code` is the status a refusing server ended the stream with); a
        backup session is kept (reads work) and `is_primary` says so.  `timeout` bounds the
        wait for the server and, with `retry`, for an election id another session holds."""
        self.close()
        ep = self.endpoint
        wait = (self.timeout or 5.0) if timeout is None else timeout
        self._open()
        try:
            grpc.channel_ready_future(self._channel).result(timeout=wait)
        except grpc.FutureTimeoutError:
            self.close()
            raise SwitchUnreachable(f"no P4Runtime server answers at {ep.address} "
                                    f"(waited {wait:g} s)") from None
        except Exception as exc:  # grpc rejects malformed targets with assorted errors
            self.close()
            raise SwitchUnreachable(f"cannot connect to {ep.address!r}: {exc}") from None
        deadline = time.monotonic() + wait
        while True:
            refused = self._arbitrate()
            if refused is None:
                break
            reason, code, detail = refused
            self._end_stream()
            # Another live session holds this election id (PI and netsum-switch refuse a second
            # one with INVALID_ARGUMENT "Election id already exists"): short sessions with the
            # topology's id -- registrations, lease renewals, netsum-ctl verbs -- take turns.
            if "already exists" not in reason or not retry or time.monotonic() > deadline:
                h, lo = ep.election_id or (0, 0)
                self.close()
                err = SwitchUnreachable(f"switch {ep} refused arbitration with election id "
                                        f"{h},{lo}: {reason}")
                err.rpc, err.code, err.detail = "StreamChannel", code, detail
                raise err
            time.sleep(random.uniform(0.05, 0.25))
        if not self._exit_hook:
            _close_at_exit(self)
            self._exit_hook = True

    def _arbitrate(self) -> tuple[str, str, str] | None:
        """Send the arbitration request on a new stream; None once a reply came, else why not:
        (reason, the status code name and message the stream ended with, if any)."""
        ep = self.endpoint
        self.stream = Stream(self._stub)
        self.stream.arbitrate(ep.device_id, ep.election_id or (0, 0), ep.role)
        end = time.monotonic() + self.arbitration_timeout
        while True:
            try:
                msg = self.stream.recv(max(0.0, end - time.monotonic()))
            except queue.Empty:
                return "no arbitration reply", "", ""
            if msg is None:
                return self.stream.failure()
            if msg.HasField("arbitration"):
                self.arbitration = msg.arbitration
                return None

    @property
    def is_primary(self) -> bool:
        """What the arbitration reply said (a later change of primary is not tracked)."""
        return self.arbitration is not None and self.arbitration.status.code == code_pb2.OK

    @property
    def connected(self) -> bool:
        """True while the stream is up.  A switch restart ends the stream."""
        return self.stream is not None and self.stream.alive

    def _open(self) -> None:
        if self._channel is None:
            self._channel = grpc.insecure_channel(self.endpoint.address, options=self.options)
            self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)

    def _end_stream(self) -> None:
        s, self.stream = self.stream, None
        if s is not None:
            s.close()

    def close(self) -> None:
        self._end_stream()
        self.arbitration = None
        ch, self._channel = self._channel, None
        if ch is not None:
            ch.close()

    # -- raw layer ----------------------------------------------------------------------------
    # The stub and the messages are Any: protobuf 3.20 generates no type information for the
    # P4Runtime modules, so there is nothing narrower to say about them.
    @property
    def stub(self) -> Any:
        if self._channel is None:
            raise SwitchUnreachable(f"not connected to switch {self.endpoint}")
        return self._stub

    @property
    def channel(self) -> grpc.Channel:
        if self._channel is None:
            raise SwitchUnreachable(f"not connected to switch {self.endpoint}")
        return self._channel

    def stamp(self, msg: Any) -> Any:
        """Fill a request's device id, election id and role from the endpoint."""
        ep = self.endpoint
        msg.device_id = ep.device_id
        if ep.election_id is not None and hasattr(msg, "election_id"):
            msg.election_id.high, msg.election_id.low = ep.election_id
        if ep.role is not None and hasattr(msg, "role"):
            msg.role = ep.role
        return msg

    def _error(self, rpc: str, exc: grpc.RpcError) -> ClientError:
        return rpc_error(rpc, exc, str(self.endpoint), self.endpoint.election_id, self.timeout)

    def _call(self, rpc: str, req: Any, timeout: float | None = None) -> Any:
        stub = self.stub
        try:
            return getattr(stub, rpc)(req, timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as exc:
            raise self._error(rpc, exc) from None

    # -- RPCs ---------------------------------------------------------------------------------
    def set_pipeline(self, p4info: p4info_pb2.P4Info, device_config: bytes,
                     cookie: int | None = None, action: int = _FWD.VERIFY_AND_COMMIT,
                     timeout: float | None = None) -> None:
        """SetForwardingPipelineConfig; VERIFY_AND_COMMIT starts the switch from empty state."""
        req = self.stamp(_FWD(action=action))
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        if cookie is not None:
            req.config.cookie.cookie = cookie
        self._call("SetForwardingPipelineConfig", req, timeout)

    def get_config(self, response_type: int = _GET.ALL) -> p4runtime_pb2.ForwardingPipelineConfig:
        """GetForwardingPipelineConfig's config; PipelineMissing when the switch has none."""
        req = _GET(device_id=self.endpoint.device_id, response_type=response_type)
        return self._call("GetForwardingPipelineConfig", req).config

    def get_pipeline(self) -> tuple[p4info_pb2.P4Info, int] | None:
        """(P4Info, cookie) of the running pipeline, or None when the switch has none."""
        try:
            config = self.get_config(_GET.P4INFO_AND_COOKIE)
        except PipelineMissing:
            return None
        if not config.HasField("p4info"):
            return None
        return config.p4info, config.cookie.cookie

    def get_cookie(self) -> int | None:
        """The running pipeline's cookie (COOKIE_ONLY: cheap enough to poll), or None when the
        switch has no pipeline."""
        try:
            return int(self.get_config(_GET.COOKIE_ONLY).cookie.cookie)
        except PipelineMissing:
            return None

    def write(self, updates: Iterable[p4runtime_pb2.Update], atomicity: int = 0) -> None:
        """One Write batch (CONTINUE_ON_ERROR by default, the only atomicity PI supports); an
        empty batch sends nothing.  On failure the error's `statuses` give each update's outcome
        in order; the updates that did not fail were applied."""
        req = self.stamp(p4runtime_pb2.WriteRequest(atomicity=atomicity))
        req.updates.extend(updates)
        if req.updates:
            self._call("Write", req)

    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        """Every entity of every ReadResponse."""
        req = p4runtime_pb2.ReadRequest(device_id=self.endpoint.device_id)
        if self.endpoint.role is not None:
            req.role = self.endpoint.role
        req.entities.extend(entities)
        stub = self.stub
        try:
            return [e for rep in stub.Read(req, timeout=self.timeout) for e in rep.entities]
        except grpc.RpcError as exc:
            raise self._error("Read", exc) from None

    def capabilities(self) -> p4runtime_pb2.CapabilitiesResponse:
        return self._call("Capabilities", p4runtime_pb2.CapabilitiesRequest())

    def api_version(self) -> str:
        return str(self.capabilities().p4runtime_api_version)


def call_json(endpoint: Endpoint, method: str, body: dict[str, Any],
              timeout: float | None) -> dict[str, Any]:
    """A unary call with JSON bodies to another service on the switch's gRPC address (`method`
    is the full path, `/package.Service/Method`); errors as the P4Runtime RPCs'."""
    with grpc.insecure_channel(endpoint.address) as ch:
        rpc = ch.unary_unary(method, request_serializer=lambda o: json.dumps(o).encode(),
                             response_deserializer=json.loads)
        try:
            reply: dict[str, Any] = rpc(body, timeout=timeout)
        except grpc.RpcError as exc:
            raise rpc_error(method.rsplit("/", 1)[-1], exc, str(endpoint), endpoint.election_id,
                            timeout) from None
    return reply
