"""Errors of the P4Runtime client library, and the one place where gRPC errors become them.

Every failure a user can cause (a bad name, a malformed literal, an unreachable or refusing
switch) is a `ClientError` with a message that stands on its own as one line.  `rpc_error` is the
only function that looks into a `grpc.RpcError`; `decode_batch` the only one that reads a failed
Write's per-update statuses.  An error that came from an RPC also carries, for whoever needs
more than the message (tests, the STF runner): `rpc`, `code` (the gRPC status name), `detail`
(the server's message) and `statuses` (one `UpdateStatus` per update of a failed Write).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

__all__ = ["ClientError", "SchemaLookupError", "LiteralError", "SwitchUnreachable", "NotPrimary",
           "PipelineMissing", "P4RuntimeError", "UpdateStatus", "decode_batch", "rpc_error"]


@dataclass(frozen=True, slots=True)
class UpdateStatus:
    """One update's outcome in a failed Write batch (P4Runtime spec §12.3): its index in the
    batch, the google.rpc code (0 = OK: PI lists the applied updates too), message and space."""
    index: int
    code: int
    message: str
    space: str = ""

    @property
    def ok(self) -> bool:
        return self.code == code_pb2.OK

    @property
    def code_name(self) -> str:
        return code_pb2.Code.Name(self.code) if self.code in code_pb2.Code.values() \
            else str(self.code)


class ClientError(Exception):
    """Base of every error the client library (and the controller above it) reports."""

    # Which switch refused, when a transaction over several switches failed on one of them
    # (set by the controller's fabric, read by its retry); None when no single switch is to blame.
    switch: str | None = None
    # Filled in by `rpc_error` when the error came from an RPC the switch answered.
    rpc: str = ""
    code: str = ""
    detail: str = ""
    statuses: tuple[UpdateStatus, ...] = ()

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    @property
    def failures(self) -> tuple[UpdateStatus, ...]:
        """The failed updates of a Write batch (the applied ones are absent)."""
        return tuple(s for s in self.statuses if not s.ok)


class SchemaLookupError(ClientError):
    """A name (table, action, field, counter, ...) that the P4Info does not have."""


class LiteralError(ClientError):
    """A literal or value that does not parse or does not fit its field (spec §8.4 widths)."""


class SwitchUnreachable(ClientError):
    """No P4Runtime server answered at the address (or the stream broke)."""


class NotPrimary(ClientError):
    """Another controller holds a higher election id; this one may only read."""


class PipelineMissing(ClientError):
    """The switch has no forwarding pipeline (never pushed, or it restarted)."""


class P4RuntimeError(ClientError):
    """A P4Runtime RPC the switch refused.  For a Write batch the message lists each failed
    update by index; the others were applied."""

    def __init__(self, rpc: str, code: str, detail: str,
                 statuses: tuple[UpdateStatus, ...] = ()) -> None:
        failed = [s for s in statuses if not s.ok]
        if failed:
            parts = "; ".join(f"update {s.index}: {s.code_name} {s.message}".rstrip()
                              for s in failed)
            text = f"{rpc} failed: {parts}"
        else:
            text = f"{rpc} failed: {code} {detail}".rstrip()
        super().__init__(text)
        self.rpc, self.code, self.detail, self.statuses = rpc, code, detail, statuses


def decode_batch(trailing_metadata: Iterable[tuple[str, Any]] | None) -> tuple[UpdateStatus, ...]:
    """The per-update statuses of a failed Write: a google.rpc.Status in the
    `grpc-status-details-bin` trailer holding one p4.v1.Error per update, in order.  PI lists
    the updates it applied with code OK among them; reading by index keeps every entry (the
    loop p4runtime-shell 0.0.6 gets stuck in).  A detail that is not a p4.v1.Error counts as
    failed (UNKNOWN, naming its type).  () when there are no details or they do not parse."""
    raw = None
    for key, value in trailing_metadata or ():
        if key == "grpc-status-details-bin":
            raw = value
    if not raw:
        return ()
    status = status_pb2.Status()
    try:
        status.ParseFromString(raw)
    except Exception:  # protobuf raises DecodeError and others for a mangled trailer
        return ()
    out = []
    for index, detail in enumerate(status.details):
        err = p4runtime_pb2.Error()
        if detail.Unpack(err):
            out.append(UpdateStatus(index, err.canonical_code, err.message, err.space))
        else:
            out.append(UpdateStatus(index, code_pb2.UNKNOWN,
                                    f"status detail of type {detail.type_url!r}"))
    return tuple(out)


def rpc_error(rpc: str, exc: grpc.RpcError, switch: str, election_id: tuple[int, int] | None,
              timeout: float | None) -> ClientError:
    """The one translation of a failed RPC into the library's errors.  `switch` names the switch
    in messages ("127.0.0.1:9559 (device 0)").  The codes with a meaning for the caller become
    their own types: UNAVAILABLE and DEADLINE_EXCEEDED -> SwitchUnreachable, PERMISSION_DENIED
    from a non-primary -> NotPrimary, FAILED_PRECONDITION "no pipeline" -> PipelineMissing;
    everything else is a P4RuntimeError."""
    status = exc.code() if hasattr(exc, "code") else None
    code = status if isinstance(status, grpc.StatusCode) else grpc.StatusCode.UNKNOWN
    detail = (exc.details() if hasattr(exc, "details") else "") or ""
    try:
        trailer = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    except Exception:  # a call torn down before its trailer arrived
        trailer = None
    statuses = decode_batch(trailer) if rpc == "Write" else ()
    failed = [s for s in statuses if not s.ok]
    err: ClientError
    if code == grpc.StatusCode.UNAVAILABLE:
        err = SwitchUnreachable(f"switch {switch} is unreachable ({rpc}: {detail})")
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
        err = SwitchUnreachable(f"switch {switch} did not answer {rpc} within {timeout:g} s"
                                if timeout is not None else
                                f"switch {switch} did not answer {rpc} in time")
    elif code == grpc.StatusCode.PERMISSION_DENIED:
        h, lo = election_id if election_id is not None else (0, 0)
        err = NotPrimary(f"switch {switch}: this controller (election id {h},{lo}) is not the "
                         f"primary; another controller holds a higher election id "
                         f"({rpc}: {detail})")
    elif code == grpc.StatusCode.FAILED_PRECONDITION and "pipeline" in detail.lower():
        err = PipelineMissing(f"switch {switch} has no forwarding pipeline ({rpc}: {detail}); "
                              "push one first (`netsum-ctl pipeline push`)")
    elif len(failed) == 1 and failed[0].code == code_pb2.PERMISSION_DENIED and \
            "primary" in failed[0].message.lower():
        err = NotPrimary(f"switch {switch}: not the primary controller ({failed[0].message})")
    else:
        return P4RuntimeError(rpc, code.name, detail, statuses)
    err.rpc, err.code, err.detail, err.statuses = rpc, code.name, detail, statuses
    return err
