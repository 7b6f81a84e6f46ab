"""Errors of the P4Runtime layer and their wire form, in one place.

`P4RTError` carries a google.rpc code and a message.  Data-plane errors (`netsum.switch.errors`) already
carry a code, so `code_and_message` turns either into the pair PI would report.  A failed Write
batch is reported the PI way (`pi_server.cpp` + `device_mgr.cpp`): gRPC status UNKNOWN with the
binary details (`grpc-status-details-bin`) holding a google.rpc.Status whose `details` has one
Any(p4.v1.Error) per update, in order, OK for the updates that succeeded.
"""
from __future__ import annotations

from collections.abc import Sequence

from google.protobuf import any_pb2
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2

from netsum.switch.errors import Code, SwitchError

__all__ = ["P4RTError", "ERROR_SPACE", "code_and_message", "batch_status", "OK"]

#: The `space` PI sets on every p4.v1.Error from simple_switch_grpc.
ERROR_SPACE = "ALL-sswitch-p4org"

OK: tuple[Code, str] = (Code.OK, "")


class P4RTError(Exception):
    """A request the P4Runtime layer refuses; maps to exactly one google.rpc code."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


def code_and_message(exc: BaseException) -> tuple[Code, str]:
    """The (code, message) an exception stands for.  Anything that is neither a P4RTError nor a
    SwitchError is a server bug: it is reported as INTERNAL rather than crashing the server."""
    if isinstance(exc, P4RTError):
        return exc.code, exc.message
    if isinstance(exc, SwitchError):
        return Code(exc.code), exc.message
    return Code.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"


def batch_status(results: Sequence[tuple[Code, str]]) -> status_pb2.Status:
    """google.rpc.Status for a Write batch in which at least one update failed."""
    status = status_pb2.Status(code=Code.UNKNOWN, message="Write failure.")
    for code, message in results:
        err = p4runtime_pb2.Error(canonical_code=int(code), message=message,
                                  space=ERROR_SPACE if code != Code.OK else "")
        packed = any_pb2.Any()
        packed.Pack(err)
        status.details.append(packed)
    return status
