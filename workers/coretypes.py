"""The worker core's vocabulary: the job and timing configuration, the state machine's tables,
the events and steps the sans-I/O API returns, statistics and the result (workers/core.py has
the protocol itself)."""
from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from netsum.wire import HEADER_BYTES, K_DEFAULT, MAX_SLOTS, MAX_WORKERS, Flags
from netsum.workers import quant, wire
from netsum.workers.blocks import BlockPlan
from netsum.workers.errors import ResultError, WireError

__all__ = [
    "JobConfig", "Timing", "CoreState", "Trigger", "TRANSITIONS", "ALLOWED_CALLS",
    "Event", "ChunkDone", "Retransmitted", "DuplicateResult", "StaleResult", "Rejected",
    "Finished", "Step", "Stats", "AllreduceResult", "AgreementError", "rejection",
]


class AgreementError(ResultError):
    """A result carries an exponent that is not the agreed one: below this worker's own
    proposal, or not EXP_ZERO where every worker proposed EXP_ZERO (no block follows).  The
    switch (or something between) does not compute max(exp); summing would overflow or lose
    precision."""


@dataclass(frozen=True, slots=True)
class JobConfig:
    """What every worker of one aggregation job agrees on (the controller's job description).
    Slots are numbered 0..num_slots-1 within the job's range: the switch adds the job's
    slot_base from its job table, so workers never see absolute register indices."""
    job_id: int
    num_workers: int
    num_slots: int
    k: int = K_DEFAULT

    def __post_init__(self) -> None:
        wire.check_k(self.k)
        checks = (("job_id", self.job_id, 0, 0xFFFF), ("num_workers", self.num_workers, 1,
                  MAX_WORKERS), ("num_slots", self.num_slots, 1, MAX_SLOTS))
        for name, value, lo, hi in checks:
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")


@dataclass(frozen=True, slots=True)
class Timing:
    """Retransmission timer (Jacobson/Karels estimate, Karn's rule, exponential backoff), the
    no-progress deadline (seconds), and the congestion window: with `adaptive`, at most cwnd
    slot uses are in flight, TCP-style: cwnd starts at `initial_window`, grows by one per
    result up to ssthresh (slow start) and by one per window of results beyond (additive
    increase); when losses are found (timeouts or fast retransmit), at most once per
    smoothed RTT, ssthresh and cwnd become half of cwnd (not below `window_min`).  So a slow
    software switch is neither flooded by the first burst nor by retransmissions.  Without
    `adaptive` the whole window is sent.

    `fast_retransmit` (0: off) is the loss signal that does not wait for a timer: when that
    many results of packets sent after the oldest unanswered one have been accepted, the
    oldest is sent again at once (without backoff).  The switch answers each use when its
    last contribution arrives and every worker launches uses in the order results arrive, so
    results come back nearly in send order and a gap of 3 means a loss (TCP's three
    duplicate ACKs).  After a random loss the job so waits about an RTT instead of an RTO.
    `window_min` is 16, not 2, so that a cut window still leaves enough later results for
    fast retransmit (docs/protocol.md, "Loss recovery", has the measurements).

    `hold_timers` (on by default) keeps timers from firing on a peer's skew: while results
    come in, a due use waits (its loss is fast retransmit's to find, as TCP restarts its one
    timer on every ACK); once nothing was accepted for an RTO, one due use goes as a probe,
    one per RTO while the switch answers them with a STATUS (it holds this worker's copy: a
    peer is late), and only when a real loss shows (a copy sent again answered by itself, or
    a probe not answered at all) do the due uses go as before, for an RTO
    (workers/recovery.py).  Off, or without fast retransmit (which finds the losses while
    results flow): every use's timer fires on its own (the behaviour before;
    docs/performance.md, section 18)."""
    rto_initial: float = 0.05
    rto_min: float = 0.005
    rto_max: float = 1.0
    backoff: float = 2.0
    progress_deadline: float = 10.0
    adaptive: bool = True
    initial_window: int = 16
    window_min: int = 16
    fast_retransmit: int = 3
    hold_timers: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.rto_min <= self.rto_initial <= self.rto_max:
            raise ValueError("need 0 < rto_min <= rto_initial <= rto_max")
        if self.backoff < 1 or self.progress_deadline <= 0:
            raise ValueError("need backoff >= 1 and progress_deadline > 0")
        if not 1 <= self.window_min <= self.initial_window:
            raise ValueError("need 1 <= window_min <= initial_window")
        if isinstance(self.fast_retransmit, bool) or not isinstance(self.fast_retransmit, int) \
                or self.fast_retransmit < 0:
            raise ValueError("need fast_retransmit >= 0 (an integer; 0 turns it off)")


class CoreState(enum.Enum):
    IDLE = "idle"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class Trigger(enum.Enum):
    START = "start"
    LAST_RESULT = "last result accepted"
    NO_PROGRESS = "progress deadline passed"
    REJECTED = "the switch refused this worker's DATA"


#: The state machine.  Any (state, trigger) pair not listed is a bug in the caller.
TRANSITIONS: dict[tuple[CoreState, Trigger], CoreState] = {
    (CoreState.IDLE, Trigger.START): CoreState.RUNNING,
    (CoreState.RUNNING, Trigger.LAST_RESULT): CoreState.DONE,
    (CoreState.RUNNING, Trigger.NO_PROGRESS): CoreState.FAILED,
    (CoreState.RUNNING, Trigger.REJECTED): CoreState.FAILED,
}

#: Which methods each state accepts.  DONE still takes packets: late duplicates are counted.
ALLOWED_CALLS: dict[str, frozenset[CoreState]] = {
    "start": frozenset({CoreState.IDLE}),
    "receive": frozenset({CoreState.RUNNING, CoreState.DONE}),
    "tick": frozenset({CoreState.RUNNING, CoreState.DONE}),
    "result": frozenset({CoreState.DONE}),
}


@dataclass(frozen=True, slots=True)
class Event:
    pass


@dataclass(frozen=True, slots=True)
class ChunkDone(Event):
    block: int
    offset: int
    latency: float


@dataclass(frozen=True, slots=True)
class Retransmitted(Event):
    slot: int
    block: int
    attempt: int
    fast: bool = False   # sent on a gap in the results (fast retransmit), not on a timer


@dataclass(frozen=True, slots=True)
class DuplicateResult(Event):
    slot: int
    round: int
    offset: int


@dataclass(frozen=True, slots=True)
class StaleResult(Event):
    slot: int
    round: int
    offset: int


@dataclass(frozen=True, slots=True)
class Rejected(Event):
    reason: str


@dataclass(frozen=True, slots=True)
class Finished(Event):
    elapsed: float


@dataclass(frozen=True, slots=True)
class Step:
    send: tuple[bytes, ...] = ()
    events: tuple[Event, ...] = ()


@dataclass(frozen=True, slots=True)
class Stats:
    packets_sent: int
    retransmissions: int
    bootstrap_packets: int
    results: int
    duplicates: int
    stale: int
    rejected: int
    chunks: int
    elapsed: float
    latencies: np.ndarray = field(compare=False, repr=False)
    fast_retransmissions: int = 0   # of `retransmissions`, those sent on a gap, not a timer
    #: uses answered sooner after their last retransmission than any round trip (it was
    #: not needed: WorkerCore._accept)
    spurious: int = 0
    #: speculative uses whose prediction missed, sent again with the agreed exponent
    misses: int = 0

    def latency_percentiles(self, q: Sequence[float] = (50, 99)) -> tuple[float, ...]:
        if not len(self.latencies):
            return tuple(float("nan") for _ in q)
        return tuple(float(v) for v in np.percentile(self.latencies, q))


@dataclass(frozen=True, slots=True)
class AllreduceResult:
    # float32: the input's shape (all-reduce), or this rank's shard, 1-D (reduce-scatter)
    tensor: np.ndarray
    stats: Stats
    next_rounds: tuple[int, ...]  # per slot of the job: the round its next use must take
    exponents: np.ndarray = field(compare=False, repr=False)  # agreed, biased, per block
    # What `bound` is made of: the array itself, or (the agreed exponents of the result's
    # blocks, workers, k, length) for quant.error_bound, computed the first time `bound` is
    # read (a float64 per element: 128 MB for 16M elements, which few callers want).
    bound_of: np.ndarray | tuple[np.ndarray, int, int, int] = field(compare=False, repr=False)
    # Per block of `blocks`: the RESULT's flags & NONFINITE (the OR over every rank's DATA
    # flags for that block): where some rank's tensor held Inf/NaN.
    flags: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8), compare=False,
                              repr=False)
    blocks: BlockPlan | None = field(default=None, compare=False, repr=False)
    # Per block of `blocks`, biased: the max of every rank's proposal as the switch returned
    # it (= `exponents` without predictions): what the next call's predictions come from.
    maxima: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8), compare=False,
                               repr=False)
    _bound: np.ndarray | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def bound(self) -> np.ndarray:
        """Per element, before float32, from the exponents the switch returned: what this
        worker can say about its own result.  A check of the switch must not use it (a switch
        that returns too high an exponent widens it): derive bounds from the inputs instead."""
        if self._bound is None:
            src = self.bound_of
            made = src if isinstance(src, np.ndarray) else quant.error_bound(*src)
            object.__setattr__(self, "_bound", made)
            return made
        return self._bound


def rejection(payload: object, job_id: int, k: int) -> str:
    """Why a received packet is not a result of job `job_id` (what a worker reports)."""
    try:
        head = wire.decode_header(payload, k)  # type: ignore[arg-type]
        kind = head.msg_type.name + (" (ACK)" if head.flags & Flags.ACK else "")
        return f"not a result of job {job_id}: {kind} of job {head.job_id}"
    except WireError as exc:
        reason = str(exc)
        if isinstance(payload, (bytes, bytearray)) and len(payload) > HEADER_BYTES and \
                (len(payload) - HEADER_BYTES) % 4 == 0:
            reason += (f" - {(len(payload) - HEADER_BYTES) // 4} values: is the P4 program "
                       f"built for K={k}?")
        return reason
