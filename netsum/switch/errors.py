"""Errors of the embedded switch.  Each maps one-to-one to a google.rpc / P4Runtime code, so the
P4Runtime layer turns them into `p4.v1.Error` entries without guessing."""
from __future__ import annotations

import enum

__all__ = [
    "Code", "SwitchError", "ConfigError", "InvalidArgument", "NotFound", "AlreadyExists",
    "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "OutOfRange", "Unimplemented",
]


class Code(enum.IntEnum):
    """google.rpc.Code values (the numbers are the wire values)."""
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14


class SwitchError(Exception):
    code: Code = Code.UNKNOWN

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(SwitchError):
    """A BMv2 JSON config the switch cannot load.  The message names the object and its JSON path,
    e.g. `actions[3] ('MyIngress.fwd'): primitive 'frobnicate' is not supported`."""
    code = Code.INVALID_ARGUMENT


class InvalidArgument(SwitchError):
    code = Code.INVALID_ARGUMENT


class NotFound(SwitchError):
    code = Code.NOT_FOUND


class AlreadyExists(SwitchError):
    code = Code.ALREADY_EXISTS


class PermissionDenied(SwitchError):
    code = Code.PERMISSION_DENIED


class ResourceExhausted(SwitchError):
    code = Code.RESOURCE_EXHAUSTED


class FailedPrecondition(SwitchError):
    code = Code.FAILED_PRECONDITION


class OutOfRange(SwitchError):
    code = Code.OUT_OF_RANGE


class Unimplemented(SwitchError):
    code = Code.UNIMPLEMENTED
