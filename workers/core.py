"""The worker protocol core, sans-I/O (like h11): no sockets, no clock.  It is given received
netsum payloads and the current time, and returns payloads to send and events.

Owns: splitting a tensor into K-element blocks, the window of outstanding slots (the job's slot
range), the round number of every use of a slot, exponent agreement (docs/quantization.md),
retransmission on timeout with backoff, accepting each result once, placing it by offset,
checking what the switch returned, statistics, and the no-progress deadline.

Schedule (W = number of slots used, nb = number of blocks): slot i carries, in order, a
bootstrap use (block i - W: zeros, proposal for block i), then blocks i, i + W, i + 2W, ...
The packet of block b is quantized with E_b (learned from the result of the slot's previous
use) and carries the proposal for block b + W.  Every use of a slot takes the slot's next round
(its low bit is the shadow set); rounds continue across calls of one job registration, so the
round each slot takes next is returned (`next_rounds`) for the next call.
"""
from __future__ import annotations

import enum
import heapq
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import numpy.typing as npt

from wireformat import (EXP_ZERO, HEADER_BYTES, HEADER_FIELDS, K_DEFAULT, MAX_SLOTS,
                        MAX_WORKERS, ROUND_BITS, Flags, MsgType, next_round)
from workers import quant, wire
from workers.errors import (ProtocolStateError, ResultError, WireError, WorkerTimeoutError)

__all__ = [
    "JobConfig", "Timing", "CoreState", "Trigger", "TRANSITIONS", "ALLOWED_CALLS",
    "Event", "ChunkDone", "Retransmitted", "DuplicateResult", "StaleResult", "Rejected",
    "Finished", "Step", "Stats", "AllreduceResult", "WorkerCore", "AgreementError",
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
    fast retransmit (docs/protocol.md, "Loss recovery", has the measurements)."""
    rto_initial: float = 0.05
    rto_min: float = 0.005
    rto_max: float = 1.0
    backoff: float = 2.0
    progress_deadline: float = 10.0
    adaptive: bool = True
    initial_window: int = 16
    window_min: int = 16
    fast_retransmit: int = 3

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


#: The state machine.  Any (state, trigger) pair not listed is a bug in the caller.
TRANSITIONS: dict[tuple[CoreState, Trigger], CoreState] = {
    (CoreState.IDLE, Trigger.START): CoreState.RUNNING,
    (CoreState.RUNNING, Trigger.LAST_RESULT): CoreState.DONE,
    (CoreState.RUNNING, Trigger.NO_PROGRESS): CoreState.FAILED,
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

    def latency_percentiles(self, q: Sequence[float] = (50, 99)) -> tuple[float, ...]:
        if not len(self.latencies):
            return tuple(float("nan") for _ in q)
        return tuple(float(v) for v in np.percentile(self.latencies, q))


@dataclass(frozen=True, slots=True)
class AllreduceResult:
    tensor: np.ndarray           # float32, the input's shape
    stats: Stats
    next_rounds: tuple[int, ...]  # per slot of the job: the round its next use must take
    exponents: np.ndarray = field(compare=False, repr=False)  # agreed, biased, per block
    # Per element, before float32, from the exponents the switch returned: what this worker
    # can say about its own result.  A check of the switch must not use it (a switch that
    # returns too high an exponent widens it): derive bounds from the inputs instead.
    bound: np.ndarray = field(compare=False, repr=False)


_IDLE = -1 << 62  # cur_block value of a slot with nothing in flight
_ROUND_SPAN = 1 << ROUND_BITS
# Plain ints for the per-packet checks (enum.Flag arithmetic costs microseconds a packet).
_RESULT = int(MsgType.RESULT)
_UNKNOWN_FLAGS = ~int(Flags.RETX)


class WorkerCore:
    """One worker's side of one allreduce of one tensor."""

    def __init__(self, tensor: object, job: JobConfig, timing: Timing = Timing(),
                 rounds: Sequence[int] | None = None) -> None:
        if not isinstance(job, JobConfig):
            raise TypeError(f"job must be a JobConfig, got {type(job).__name__}")
        if not isinstance(timing, Timing):
            raise TypeError(f"timing must be a Timing, got {type(timing).__name__}")
        x = quant.as_tensor(tensor)
        # as_tensor accepted `tensor`, so it is array-like (the parameter is `object` because
        # that check is made at run time, with a clear error).
        self._shape = np.shape(cast("npt.ArrayLike", tensor))
        self._job = job
        self._timing = timing
        k = job.k
        self._rows = quant.blocks(x, k)
        self._length = len(x)
        self._nb = len(self._rows)
        self._shift = quant.scale_shift(job.num_workers)
        # Validates finiteness before anything is sent: a bad gradient never reaches the wire.
        self._proposals = quant.block_exponents(x, k).tolist()
        self._agreed = np.zeros(self._nb, dtype=np.uint8)
        # Result payloads by block, decoded all at once by result(): one vectorised
        # conversion instead of a numpy call per packet on the receive path.
        self._results_raw: list[bytes] = [b""] * self._nb
        if rounds is None:
            rounds = (0,) * job.num_slots
        if len(rounds) != job.num_slots or any(
                isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < _ROUND_SPAN
                for r in rounds):
            raise ValueError(f"rounds must be {job.num_slots} integers in 0..2^{ROUND_BITS}-1 "
                             "(one per slot)")
        self._next_rounds = list(rounds)
        w = min(job.num_slots, self._nb)
        self._w = w
        self._cur_block = [_IDLE] * w
        self._cur_round = [0] * w
        self._packet: list[bytes] = [b""] * w
        self._first_sent = [0.0] * w
        self._attempts = [0] * w
        self._rto = [timing.rto_initial] * w
        self._accepted: list[tuple[int, int] | None] = [None] * w   # (round, offset)
        self._timer = np.full(w, np.inf)
        self._active = 0
        self._cwnd = float(min(timing.initial_window, w) if timing.adaptive else w)
        self._ssthresh = float(w)
        self._in_flight = 0
        self._pending: list[int] = []   # heap of blocks whose slot is free, waiting for cwnd
        # Heap of launched blocks, for the lowest block in flight; entries whose slot has
        # moved on (cur_block[b % w] != b) are stale and dropped when they reach the top.
        self._flying: list[int] = []
        self._last_cut = -np.inf
        # Fast retransmit: every transmission gets the next sequence number; `_unanswered`
        # is a heap of (seq, slot) of transmissions in flight, stale entries (the slot was
        # answered or sent again since) dropped when they reach the top.  `_gap` counts the
        # accepted results of later transmissions since `_gap_seq` became the oldest.
        self._seq = [0] * w
        self._tx_at = [0.0] * w         # when slot i's packet was last sent
        self._min_rtt = np.inf
        self._tx = 0
        self._unanswered: list[tuple[int, int]] = []
        self._gap_seq = -1
        self._gap = 0
        self._fast = 0
        self._srtt: float | None = None
        self._rttvar = 0.0
        self._base_rto = timing.rto_initial
        self._codec = wire.header_codec()
        # Positions of the header fields receive() needs, in the codec's HEADER_FIELDS order.
        names = [f.name for f in HEADER_FIELDS]
        self._pick = operator.itemgetter(*(names.index(n) for n in (
            "msg_type", "flags", "job_id", "round", "slot", "exp", "count", "offset")))
        # Byte offset of the flags field (a whole byte of its own): retransmissions set RETX
        # in a copy of the prebuilt packet instead of building it again.
        self._flags_at = next(u.offset for u in wire.header_units()
                              if u.fields == (("flags", 0, 8),))
        self._size = HEADER_BYTES + 4 * k
        self._zeros = bytes(4 * k)
        self._latency = np.zeros(self._nb)
        self._state = CoreState.IDLE
        self._started = self._finished = self._progress = 0.0
        self._sent = self._retx = self._boot = self._results = 0
        self._dups = self._stale = self._rejected = self._chunks = 0
        self._last_reject = ""

    # -- state machine -----------------------------------------------------------------------

    @property
    def state(self) -> CoreState:
        return self._state

    def _check(self, call: str) -> None:
        if self._state not in ALLOWED_CALLS[call]:
            raise ProtocolStateError(f"{call}() is not allowed in state {self._state.value}")

    def _fire(self, trigger: Trigger) -> None:
        self._state = TRANSITIONS[(self._state, trigger)]

    # -- sending -----------------------------------------------------------------------------

    def _offset(self, i: int, block: int) -> int:
        # A bootstrap use (block < 0) is tagged with the offset of the block it proposes for.
        return (block if block >= 0 else block + self._w) * self._job.k

    def _build(self, i: int, block: int) -> bytes:
        job = self._job
        ahead = block + self._w
        exp = self._proposals[ahead] if ahead < self._nb else EXP_ZERO
        if block >= 0:
            values = quant.quantize_block(self._rows[block], int(self._agreed[block]),
                                          self._shift)
        else:
            values = self._zeros
        head = self._codec.pack(msg_type=MsgType.DATA, flags=0, job_id=job.job_id,
                                round=self._cur_round[i], slot=i, exp=exp, count=0,
                                offset=self._offset(i, block))
        return head + values

    def _launch(self, i: int, block: int, now: float) -> bytes:
        self._cur_block[i] = block
        heapq.heappush(self._flying, block)
        pkt = self._build(i, block)
        self._packet[i] = pkt
        self._first_sent[i] = now
        self._attempts[i] = 0
        self._rto[i] = self._base_rto
        self._timer[i] = now + self._base_rto
        self._stamp(i, now)
        self._in_flight += 1
        self._sent += 1
        if block < 0:
            self._boot += 1
        return pkt

    def start(self, now: float) -> Step:
        """Begin: the bootstrap packets of every slot in use."""
        self._check("start")
        self._fire(Trigger.START)
        self._started = self._progress = now
        for i in range(self._w):
            self._cur_round[i] = self._next_rounds[i]
            self._pending.append(i - self._w)   # ascending: already a heap
        self._active = self._w
        return Step(tuple(self._pump(now)))

    # -- receiving ---------------------------------------------------------------------------

    def receive(self, payload: bytes, now: float) -> Step:
        """One received netsum payload (UDP payload).  Never raises for bad packets: they are
        counted and reported as `Rejected`; the only error is a broken exponent agreement."""
        self._check("receive")
        if not isinstance(payload, (bytes, bytearray, memoryview)) or len(payload) != self._size:
            return self._reject(payload)
        msg_type, flags, job_id, round_, slot, exp, _, offset = self._pick(
            self._codec.unpack(payload))
        if msg_type != _RESULT or job_id != self._job.job_id or flags & _UNKNOWN_FLAGS:
            return self._reject(payload)
        i = slot
        if i >= self._w:
            self._stale += 1
            return Step((), (StaleResult(slot, round_, offset),))
        block = self._cur_block[i]
        if block == _IDLE or round_ != self._cur_round[i] or offset != self._offset(i, block):
            if (round_, offset) == self._accepted[i]:
                self._dups += 1
                return Step((), (DuplicateResult(slot, round_, offset),))
            self._stale += 1
            return Step((), (StaleResult(slot, round_, offset),))
        return self._accept(i, block, round_, exp, offset, payload, now)

    def _reject(self, payload: object) -> Step:
        """The slow path: say precisely what is wrong with a packet that is not ours."""
        self._rejected += 1
        try:
            head = wire.decode_header(payload, self._job.k)  # type: ignore[arg-type]
            reason = (f"not a result of job {self._job.job_id}: {head.msg_type.name} of job "
                      f"{head.job_id}")
        except WireError as exc:
            reason = str(exc)
            if isinstance(payload, (bytes, bytearray)) and len(payload) > HEADER_BYTES and \
                    (len(payload) - HEADER_BYTES) % 4 == 0:
                reason += (f" - {(len(payload) - HEADER_BYTES) // 4} values: is the P4 "
                           f"program built for K={self._job.k}?")
        self._last_reject = reason
        return Step((), (Rejected(reason),))

    def _accept(self, i: int, block: int, round_: int, exp: int, offset: int, payload: bytes,
                now: float) -> Step:
        if block < 0 and payload[HEADER_BYTES:] != self._zeros:
            # Every worker's bootstrap carries zeros, so their sum is zero whatever the switch
            # held: anything else is a sum the switch got wrong (or added twice).
            raise ResultError(
                f"job {self._job.job_id} slot {i} round {round_}: the bootstrap result (a sum "
                f"of zeros) is not zero; the switch added something that was not sent for "
                "this round")
        events: list[Event] = []
        ahead = block + self._w
        if ahead < self._nb:
            if exp < self._proposals[ahead]:
                raise AgreementError(
                    f"job {self._job.job_id} slot {i}: result agrees exponent "
                    f"{exp} for block {ahead}, below this worker's proposal "
                    f"{self._proposals[ahead]}; the switch must return max(exp)")
            self._agreed[ahead] = exp
        elif exp != EXP_ZERO:
            # No block follows: every worker (same tensor length) proposed EXP_ZERO.
            raise AgreementError(
                f"job {self._job.job_id} slot {i}: result agrees exponent {exp} where every "
                f"worker proposed {EXP_ZERO} (no block follows); the switch must return "
                "max(exp)")
        if block >= 0:
            self._results_raw[block] = bytes(payload[HEADER_BYTES:])
            latency = now - self._first_sent[i]
            self._latency[block] = latency
            self._chunks += 1
            events.append(ChunkDone(block, block * self._job.k, latency))
        if self._attempts[i] == 0:
            self._sample_rtt(now - self._first_sent[i])
            self._min_rtt = min(self._min_rtt, now - self._first_sent[i])
        self._results += 1
        self._accepted[i] = (round_, offset)
        self._progress = now
        self._in_flight -= 1
        self._cur_block[i] = _IDLE
        self._timer[i] = np.inf
        out = self._gap_check(self._seq[i], now - self._tx_at[i], now, events) \
            if self._timing.fast_retransmit else []
        if self._timing.adaptive:
            grow = 1.0 if self._cwnd < self._ssthresh else 1.0 / self._cwnd
            self._cwnd = min(self._cwnd + grow, float(self._w))
        self._cur_round[i] = next_round(round_)
        if ahead < self._nb:
            heapq.heappush(self._pending, ahead)
        else:
            self._next_rounds[i] = self._cur_round[i]
            self._active -= 1
            if self._active == 0:
                self._fire(Trigger.LAST_RESULT)
                self._finished = now
                events.append(Finished(now - self._started))
        if self._state is CoreState.RUNNING:
            out += self._pump(now)
        return Step(tuple(out), tuple(events))

    def _stamp(self, i: int, now: float) -> None:
        """Give slot i's transmission (first or again) the next sequence number."""
        self._tx_at[i] = now
        self._tx += 1
        self._seq[i] = self._tx
        if self._timing.fast_retransmit:
            heapq.heappush(self._unanswered, (self._tx, i))

    def _gap_check(self, seq: int, rtt: float, now: float, events: list[Event]) -> list[bytes]:
        """An accepted result of transmission `seq`, `rtt` after it was sent: if the oldest
        unanswered transmission is older, one more result has passed it.  It is sent again
        once `fast_retransmit` results have passed it and it has waited longer than the
        passing one's round trip plus a quarter of the least round trip seen (RACK's
        reordering window, RFC 8985): uses sent in one burst come back in any order, and
        that alone must not look like a loss.  The count restarts when the oldest changes,
        which only delays the next detection; the timer still covers what this misses."""
        heap, cur, seqs = self._unanswered, self._cur_block, self._seq
        while heap:
            s, j = heap[0]
            if cur[j] != _IDLE and seqs[j] == s:
                break
            heapq.heappop(heap)
        else:
            return []
        if s > seq:
            return []
        if s != self._gap_seq:
            self._gap_seq, self._gap = s, 0
        self._gap += 1
        if self._gap < self._timing.fast_retransmit or \
                now - self._tx_at[j] < rtt + self._min_rtt / 4:
            return []
        heapq.heappop(heap)
        self._fast += 1
        if self._timing.adaptive:
            self._loss_signal(now)
        # Not a timeout: the slot's RTO keeps its value (no backoff), restarted from now.
        self._timer[j] = now + self._rto[j]
        return [self._retransmit(j, now, events, fast=True)]

    def _loss_signal(self, now: float) -> None:
        """A loss was found (timeout or gap): halve cwnd, at most once per smoothed RTT (the
        losses of one burst are all found within about an RTT), never below `window_min`.
        Random loss and a switch's overflowing socket buffer look alike to a worker (tried:
        a standing-queue test on the RTT misses the overflow, whose first samples are already
        queued), so every loss episode cuts, as in TCP; what keeps random loss cheap is the
        floor: with `window_min` (16) uses in flight, enough later results come back for fast
        retransmit to find the next loss, where a window of 2 left every loss to the timer."""
        t = self._timing
        if now - self._last_cut < (self._srtt or self._base_rto):
            return
        self._ssthresh = max(self._cwnd / 2, float(min(t.window_min, self._w)))
        self._cwnd = self._ssthresh
        self._last_cut = now

    def _retransmit(self, i: int, now: float, events: list[Event], fast: bool = False) -> bytes:
        self._attempts[i] += 1   # Karn: no RTT sample from this slot use any more
        self._stamp(i, now)
        pkt = self._packet[i]
        at = self._flags_at
        self._sent += 1
        self._retx += 1
        events.append(Retransmitted(i, self._cur_block[i], self._attempts[i], fast))
        return pkt[:at] + bytes((pkt[at] | Flags.RETX,)) + pkt[at + 1:]

    def _pump(self, now: float) -> list[bytes]:
        """Launch pending blocks, lowest first, while the window allows.  A pending block
        below every block in flight is launched even into a full window: otherwise workers
        whose windows filled in different orders could each wait for a block the other holds
        back.  With it, the lowest block not yet done everywhere can always be sent by every
        worker, so the job always progresses (docs/protocol.md, "Window")."""
        out = []
        pending = self._pending
        while pending:
            block = pending[0]
            if self._in_flight >= self._cwnd and block > self._lowest_in_flight(block):
                break
            heapq.heappop(pending)
            out.append(self._launch(block % self._w, block, now))
        return out

    def _lowest_in_flight(self, default: int) -> int:
        """min(b for b in cur_block if b != _IDLE), or `default` when none is in flight;
        amortised O(log w) instead of a scan of every slot per packet."""
        flying, cur, w = self._flying, self._cur_block, self._w
        while flying:
            b = flying[0]
            if cur[b % w] == b:
                return b
            heapq.heappop(flying)
        return default

    def _sample_rtt(self, rtt: float) -> None:
        # RFC 6298: SRTT/RTTVAR with alpha 1/8, beta 1/4; RTO = SRTT + 4 RTTVAR, clamped.
        if self._srtt is None:
            self._srtt, self._rttvar = rtt, rtt / 2
        else:
            self._rttvar += (abs(self._srtt - rtt) - self._rttvar) / 4
            self._srtt += (rtt - self._srtt) / 8
        t = self._timing
        self._base_rto = min(max(self._srtt + 4 * self._rttvar, t.rto_min), t.rto_max)

    # -- timers ------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When tick() next has work: the earliest retransmission or the progress deadline."""
        if self._state is not CoreState.RUNNING:
            return None
        return min(float(self._timer.min()), self._progress + self._timing.progress_deadline)

    def tick(self, now: float) -> Step:
        """Retransmit what timed out; raise WorkerTimeoutError after the progress deadline."""
        self._check("tick")
        if self._state is not CoreState.RUNNING:
            return Step()
        silent = now - self._progress
        # Same expression as next_deadline(): (a + b) - a may be < b in floating point, and a
        # caller woken at next_deadline() must see the deadline as passed.
        if now >= self._progress + self._timing.progress_deadline:
            self._fire(Trigger.NO_PROGRESS)
            waiting = [i for i in range(self._w)
                       if self._cur_block[i] != _IDLE]
            raise WorkerTimeoutError(
                f"job {self._job.job_id}: no result for {silent:.2f}s (deadline "
                f"{self._timing.progress_deadline:g}s); {self._chunks}/{self._nb} chunks done, "
                f"{len(waiting)} slots waiting (first: {waiting[:8]}); is every one of the "
                f"{self._job.num_workers} workers running and the switch configured for this job?"
                + (f" ({self._rejected} packets rejected, last: {self._last_reject})"
                   if self._rejected else ""))
        out = []
        events: list[Event] = []
        t = self._timing
        due = np.flatnonzero(self._timer <= now)
        if len(due) and t.adaptive:
            self._loss_signal(now)
            allowed = max(1, int(self._cwnd))
            if len(due) > allowed:
                # Oldest first; the rest wait an RTO more without counting as an attempt, so
                # a cut window is not undone by a burst of retransmissions.
                due = due[np.argsort(self._timer[due], kind="stable")]
                self._timer[due[allowed:]] = now + self._base_rto
                due = due[:allowed]
        for i in due.tolist():
            self._rto[i] = min(self._rto[i] * t.backoff, t.rto_max)
            self._timer[i] = now + self._rto[i]
            out.append(self._retransmit(i, now, events))
        return Step(tuple(out), tuple(events))

    # -- results -----------------------------------------------------------------------------

    def stats(self, now: float | None = None) -> Stats:
        end = self._finished if self._state is CoreState.DONE else (
            self._progress if now is None else now)
        return Stats(self._sent, self._retx, self._boot, self._results, self._dups, self._stale,
                     self._rejected, self._chunks, end - self._started, self._latency.copy(),
                     self._fast)

    def next_rounds(self) -> tuple[int, ...]:
        """Per slot of the job, the round its next use takes: the next call of the same job
        registration starts there (slots this call did not use keep theirs)."""
        return tuple(self._next_rounds)

    def result(self) -> AllreduceResult:
        self._check("result")
        job = self._job
        sums = np.frombuffer(b"".join(self._results_raw), dtype=">i4").astype(np.int32)
        out = quant.dequantize(sums.reshape(self._nb, job.k), self._agreed, job.num_workers,
                               self._length)
        bound = quant.error_bound(self._agreed, job.num_workers, job.k, self._length)
        return AllreduceResult(out.reshape(self._shape), self.stats(), self.next_rounds(),
                               self._agreed.copy(), bound)
