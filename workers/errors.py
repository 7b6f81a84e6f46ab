"""Errors raised by the workers package, in one place so callers (and the CLI edge) can catch
them by kind.  Every error derives from `WorkerError`; the CLI turns any of them into a one-line
message."""
from __future__ import annotations

__all__ = [
    "WorkerError", "WireError", "QuantError", "NonFiniteError", "SumOverflowError",
    "ProtocolStateError", "WorkerTimeoutError", "TransportError", "ResultError",
    "RejectedError",
]


class WorkerError(Exception):
    """Base of every error the workers package raises on purpose."""


class WireError(WorkerError, ValueError):
    """A packet or frame is truncated, corrupted or not a netsum packet; or fields to encode are
    out of range."""


class QuantError(WorkerError, ValueError):
    """A tensor cannot be quantized or a result cannot be dequantized as asked."""


class NonFiniteError(QuantError):
    """The tensor holds NaN or +/-Inf; `offset` is the first such element."""

    def __init__(self, offset: int, value: float) -> None:
        super().__init__(f"tensor element at offset {offset} is {value!r}: NaN/Inf cannot be "
                         "aggregated (check the gradient for a divergence upstream)")
        self.offset = offset
        self.value = value


class SumOverflowError(QuantError):
    """The aggregated value at `offset` does not fit in float32."""

    def __init__(self, offset: int, value: float) -> None:
        super().__init__(f"aggregated value at offset {offset} is {value!r}, beyond the float32 "
                         "range; the inputs are too large to sum in float32")
        self.offset = offset
        self.value = value
        self.next_rounds: tuple[int, ...] | None = None  # set by allreduce: the call completed


class ResultError(WorkerError):
    """A result the switch returned cannot be right: what this worker knows without trusting
    the switch (its own proposal, that bootstrap rounds sum zeros) contradicts it."""


class RejectedError(WorkerError):
    """The switch refused this worker's DATA (a REJECT): its configuration or tensor disagrees
    with the job or with what the other members sent.  `reason` is the wire's Reason, `field`
    and `switch_value` what the switch holds, `ours` what this worker sent."""

    def __init__(self, message: str, reason: int, field: str, switch_value: int,
                 ours: int | None) -> None:
        super().__init__(message)
        self.reason = reason
        self.field = field
        self.switch_value = switch_value
        self.ours = ours


class ProtocolStateError(WorkerError, RuntimeError):
    """A worker core method was called in a state that does not allow it."""


class WorkerTimeoutError(WorkerError, TimeoutError):
    """No result arrived for longer than the progress deadline: a peer or the switch is silent."""


class TransportError(WorkerError, OSError):
    """A socket could not be opened, bound or used."""
