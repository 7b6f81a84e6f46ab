"""Errors of the controller library.

Every failure a user can cause (a bad name, a malformed literal, a bad topology file, an
unreachable or refusing switch, a job that does not fit) is one of these, with a message that
stands on its own as one line.  The CLI turns them into `netsum-ctl: error: <message>` at one
place; nothing below it prints or exits.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ControllerError", "SchemaLookupError", "LiteralError", "TopologyError", "AllocationError",
    "JobError", "SwitchUnreachable", "NotPrimary", "P4RuntimeError", "UpdateFailure",
    "PipelineMissing",
]


class ControllerError(Exception):
    """Base of every error the controller reports to a user."""

    # Which switch refused, when a transaction over several switches failed on one of them
    # (set by the fabric, read by its retry); None when no single switch is to blame.
    switch: str | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class SchemaLookupError(ControllerError):
    """A name (table, action, field, counter, ...) that the P4Info does not have."""


class LiteralError(ControllerError):
    """A literal that does not parse or does not fit its field (spec §8.4 widths)."""


class TopologyError(ControllerError):
    """A topology/job file that is malformed; the message names the path of the bad item."""


class AllocationError(ControllerError):
    """A slot-range request that does not fit; the message says how much is free."""


class JobError(ControllerError):
    """A job operation that makes no sense (unknown job, duplicate id, bad membership)."""


class SwitchUnreachable(ControllerError):
    """No P4Runtime server answered at the address (or the stream broke)."""


class NotPrimary(ControllerError):
    """Another controller holds a higher election id; this one may only read."""


class PipelineMissing(ControllerError):
    """The switch has no forwarding pipeline (never pushed, or it restarted)."""


@dataclass(frozen=True, slots=True)
class UpdateFailure:
    """One failed update of a Write batch: its index in the batch, code name and message."""
    index: int
    code: str
    message: str


class P4RuntimeError(ControllerError):
    """A P4Runtime RPC the switch refused.  `code` is the gRPC status name (e.g. 'NOT_FOUND');
    for a Write batch, `failures` lists each failed update (the successful ones are absent)."""

    def __init__(self, rpc: str, code: str, message: str,
                 failures: tuple[UpdateFailure, ...] = ()) -> None:
        self.rpc = rpc
        self.code = code
        self.failures = failures
        if failures:
            parts = "; ".join(f"update {f.index}: {f.code} {f.message}".rstrip()
                              for f in failures)
            text = f"{rpc} failed: {parts}"
        else:
            text = f"{rpc} failed: {code} {message}".rstrip()
        super().__init__(text)
        self.detail = message
