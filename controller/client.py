"""The P4Runtime session with one switch: the only module that touches gRPC.

Each `SwitchClient` wraps its own p4runtime-shell `P4RuntimeClient` (one channel, one
StreamChannel, one arbitration), never p4runtime-shell's module-global `shell` context, so one
process can drive several switches at once.  p4runtime-shell is used for what it does well (the
stream and its receive thread); three of its behaviours are replaced here:

- its handshake calls `sys.exit` when no arbitration reply comes; ours raises `SwitchUnreachable`
  and records whether we are primary;
- its Write error decoding (`P4RuntimeErrorIterator`, 0.0.6) loops forever on a partly failed
  batch, because the per-update details of the successful updates carry code OK; we decode the
  `grpc-status-details-bin` trailer ourselves (one `p4.v1.Error` per update, in order);
- every other RPC error becomes a `P4RuntimeError` naming the RPC and the status code, and the
  two codes with a meaning for the caller become their own types: PERMISSION_DENIED from a
  non-primary → `NotPrimary`, FAILED_PRECONDITION "no pipeline" → `PipelineMissing`.
"""
from __future__ import annotations

import queue
import random
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2
from p4runtime_sh.p4runtime import P4RuntimeClient

from netsum.controller.errors import (NotPrimary, P4RuntimeError, PipelineMissing, SwitchUnreachable,
                               UpdateFailure)

__all__ = ["Endpoint", "SwitchClient"]

_FWD = p4runtime_pb2.SetForwardingPipelineConfigRequest


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a switch's P4Runtime server is and who we are to it.

    Both ids are explicit because the usual defaults disagree (simple_switch_grpc's device id is
    0, p4runtime-shell's is 1) and a wrong one fails late and obscurely."""
    address: str
    device_id: int
    election_id: tuple[int, int] = (0, 1)
    role: str | None = None

    def __str__(self) -> str:
        return f"{self.address} (device {self.device_id})"


class _ShellSession(P4RuntimeClient):
    """p4runtime-shell's client with a handshake that reports instead of exiting."""

    arbitration_timeout: float = 2.0

    def handshake(self) -> None:
        self.primary = False
        self.arbitration_failure: str | None = None
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = self.election_id[0]
        req.arbitration.election_id.low = self.election_id[1]
        if self.role_name is not None:
            req.arbitration.role.name = self.role_name
        self.stream_out_q.put(req)
        try:
            rep = self.stream_in_q["arbitration"].get(timeout=self.arbitration_timeout)
        except queue.Empty:
            rep = None
        if rep is None:
            self.arbitration_failure = _stream_failure(self.stream)
            return
        self.primary = rep.arbitration.status.code == code_pb2.OK


def _close_before_exit(session: _ShellSession) -> None:
    """p4runtime-shell's receive thread is not a daemon, so a session its owner forgot to close
    would keep the interpreter from exiting (it blocks on the open stream).  Interpreter exit
    joins such threads *before* atexit handlers run; `threading._register_atexit` (the hook
    concurrent.futures uses) runs first.  A weak reference keeps closed sessions collectable."""
    register = getattr(threading, "_register_atexit", None)
    if register is None:
        return
    ref = weakref.ref(session)

    def close() -> None:
        s = ref()
        if s is not None and getattr(s, "channel", None) is not None and \
                s.stream_recv_thread.is_alive():
            s.tear_down()

    try:
        register(close)
    except RuntimeError:  # already shutting down
        pass


def _stream_failure(stream: Any) -> str:
    """Why a stream gave no arbitration reply: the server's status if the stream ended."""
    try:
        done = stream.done()
        if done:
            code = stream.code()
            details = stream.details()
            return f"{code.name} {details}".strip()
    except Exception:  # the call object may be half torn down; the generic reason suffices
        pass
    return "no arbitration reply"


class SwitchClient:
    """One P4Runtime session (channel + stream + arbitration) with one switch."""

    def __init__(self, endpoint: Endpoint, timeout: float = 5.0) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._session: _ShellSession | None = None

    # -- session ------------------------------------------------------------------------------
    def connect(self, timeout: float | None = None) -> None:
        """Open the stream and arbitrate.  Raises SwitchUnreachable; a backup session is kept
        (reads work) and `is_primary` says so.  `timeout` bounds the wait for the server."""
        self.close()
        ep = self.endpoint
        wait = self.timeout if timeout is None else timeout
        probe = grpc.insecure_channel(ep.address)
        try:
            grpc.channel_ready_future(probe).result(timeout=wait)
        except grpc.FutureTimeoutError:
            raise SwitchUnreachable(f"no P4Runtime server answers at {ep.address} "
                                    f"(waited {wait:g} s)") from None
        except Exception as exc:  # grpc rejects malformed targets with assorted errors
            raise SwitchUnreachable(f"cannot connect to {ep.address!r}: {exc}") from None
        finally:
            probe.close()
        deadline = time.monotonic() + wait
        while True:
            session = _ShellSession(ep.device_id, ep.address, ep.election_id, ep.role)
            reason = session.arbitration_failure
            if reason is None:
                break
            session.tear_down()
            # Another live session holds this election id (PI and netsum-switch refuse a second
            # one with INVALID_ARGUMENT "Election id already exists"): short sessions with the
            # topology's id -- registrations, lease renewals, netsum-ctl verbs -- take turns.
            if "already exists" not in reason or time.monotonic() > deadline:
                raise SwitchUnreachable(f"switch {ep} refused arbitration with election id "
                                        f"{ep.election_id[0]},{ep.election_id[1]}: {reason}")
            time.sleep(random.uniform(0.05, 0.25))
        self._session = session
        _close_before_exit(session)

    @property
    def is_primary(self) -> bool:
        return self._session is not None and self._session.primary

    @property
    def connected(self) -> bool:
        """True while the stream is up.  A switch restart ends the stream; the receive thread
        exits when it does."""
        s = self._session
        return s is not None and s.stream_recv_thread.is_alive() and not s.stream.done()

    def close(self) -> None:
        s, self._session = self._session, None
        if s is not None:
            s.tear_down()

    # The stub and the messages are Any: protobuf 3.20 generates no type information for the
    # P4Runtime modules, so there is nothing narrower to say about them.
    def _stub(self) -> Any:
        if self._session is None:
            raise SwitchUnreachable(f"not connected to switch {self.endpoint}")
        return self._session.stub

    def _election(self, msg: Any) -> None:
        msg.election_id.high = self.endpoint.election_id[0]
        msg.election_id.low = self.endpoint.election_id[1]
        if self.endpoint.role is not None:
            msg.role = self.endpoint.role

    # -- RPCs ---------------------------------------------------------------------------------
    def set_pipeline(self, p4info: p4info_pb2.P4Info, device_config: bytes,
                     cookie: int = 0) -> None:
        """SetForwardingPipelineConfig(VERIFY_AND_COMMIT): the switch starts from empty state."""
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.endpoint.device_id, action=_FWD.VERIFY_AND_COMMIT)
        self._election(req)
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        self._call("SetForwardingPipelineConfig", "SetForwardingPipelineConfig", req)

    def get_pipeline(self) -> tuple[p4info_pb2.P4Info, int] | None:
        """(P4Info, cookie) of the running pipeline, or None when the switch has none."""
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.endpoint.device_id, response_type=
            p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        try:
            rep = self._call("GetForwardingPipelineConfig", "GetForwardingPipelineConfig", req)
        except PipelineMissing:
            return None
        if not rep.config.HasField("p4info"):
            return None
        return rep.config.p4info, rep.config.cookie.cookie

    def get_cookie(self) -> int | None:
        """The running pipeline's cookie (COOKIE_ONLY: cheap enough to poll), or None when the
        switch has no pipeline."""
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.endpoint.device_id, response_type=
            p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        try:
            rep = self._call("GetForwardingPipelineConfig", "GetForwardingPipelineConfig", req)
        except PipelineMissing:
            return None
        return int(rep.config.cookie.cookie)

    def write(self, updates: Sequence[p4runtime_pb2.Update]) -> None:
        """One Write batch (CONTINUE_ON_ERROR, the only atomicity PI supports).  On failure the
        P4RuntimeError lists each failed update by index; the others were applied."""
        if not updates:
            return
        req = p4runtime_pb2.WriteRequest(device_id=self.endpoint.device_id)
        self._election(req)
        req.updates.extend(updates)
        self._call("Write", "Write", req)

    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.endpoint.device_id)
        if self.endpoint.role is not None:
            req.role = self.endpoint.role
        req.entities.extend(entities)
        stub = self._stub()
        out: list[p4runtime_pb2.Entity] = []
        try:
            for rep in stub.Read(req, timeout=self.timeout):
                out.extend(rep.entities)
        except grpc.RpcError as exc:
            raise self._error("Read", exc) from None
        return out

    def api_version(self) -> str:
        rep = self._call("Capabilities", "Capabilities", p4runtime_pb2.CapabilitiesRequest())
        return str(rep.p4runtime_api_version)

    def _call(self, rpc: str, method: str, req: Any) -> Any:
        stub = self._stub()
        try:
            return getattr(stub, method)(req, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise self._error(rpc, exc) from None

    # -- errors -------------------------------------------------------------------------------
    def _error(self, rpc: str, exc: grpc.RpcError) -> Exception:
        code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
        details = (exc.details() if hasattr(exc, "details") else "") or ""
        ep = self.endpoint
        if code == grpc.StatusCode.UNAVAILABLE:
            return SwitchUnreachable(f"switch {ep} is unreachable ({rpc}: {details})")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return SwitchUnreachable(f"switch {ep} did not answer {rpc} within {self.timeout:g} s")
        if code == grpc.StatusCode.PERMISSION_DENIED:
            h, lo = ep.election_id
            return NotPrimary(f"switch {ep}: this controller (election id {h},{lo}) is not the "
                              f"primary; another controller holds a higher election id "
                              f"({rpc}: {details})")
        if code == grpc.StatusCode.FAILED_PRECONDITION and "pipeline" in details.lower():
            return PipelineMissing(f"switch {ep} has no forwarding pipeline ({rpc}: {details}); "
                                   "push one first (`netsum-ctl pipeline push`)")
        failures = _batch_failures(exc) if rpc == "Write" else ()
        if len(failures) == 1 and failures[0].code == "PERMISSION_DENIED" and \
                "primary" in failures[0].message.lower():
            return NotPrimary(f"switch {ep}: not the primary controller ({failures[0].message})")
        return P4RuntimeError(rpc, code.name, details, failures)


def _batch_failures(exc: grpc.RpcError) -> tuple[UpdateFailure, ...]:
    """Per-update errors of a failed Write (P4Runtime spec §12.3): google.rpc.Status in the
    `grpc-status-details-bin` trailer, one p4.v1.Error per update in order, OK for the ones that
    were applied.  Iterates by index, so OK entries cannot stall it."""
    try:
        trailer = dict(exc.trailing_metadata() or ())
    except Exception:
        return ()
    raw = trailer.get("grpc-status-details-bin")
    if not raw:
        return ()
    status = status_pb2.Status()
    try:
        status.ParseFromString(raw)
    except Exception:
        return ()
    out = []
    for index, detail in enumerate(status.details):
        err = p4runtime_pb2.Error()
        if not detail.Unpack(err) or err.canonical_code == code_pb2.OK:
            continue
        name = code_pb2.Code.Name(err.canonical_code) if err.canonical_code in \
            code_pb2.Code.values() else str(err.canonical_code)
        out.append(UpdateFailure(index, name, err.message))
    return tuple(out)
