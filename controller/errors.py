"""Errors of the controller library.

Every failure a user can cause (a bad topology file, a job that does not fit; and, from the
P4Runtime client library below, a bad name, a malformed literal, an unreachable or refusing
switch) is a `ControllerError` with a message that stands on its own as one line.  The CLI turns
them into `netsum-ctl: error: <message>` at one place; nothing below it prints or exits.

`ControllerError` *is* the client library's base `netsum.p4rt.errors.ClientError`: the
controller's own errors extend it, so one `except ControllerError` at an edge (the CLI, the rig,
training's registration) catches both kinds.
"""
from __future__ import annotations

from netsum.p4rt.errors import ClientError

__all__ = ["ControllerError", "TopologyError", "AllocationError", "JobError"]

ControllerError = ClientError


class TopologyError(ControllerError):
    """A topology/job file that is malformed; the message names the path of the bad item."""


class AllocationError(ControllerError):
    """A slot-range request that does not fit; the message says how much is free."""


class JobError(ControllerError):
    """A job operation that makes no sense (unknown job, duplicate id, bad membership)."""
