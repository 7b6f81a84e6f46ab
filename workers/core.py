"""The worker protocol core, sans-I/O (like h11): no sockets, no clock.  It is given received
netsum payloads and the current time, and returns payloads to send and events.

Owns: splitting a tensor into K-element blocks (workers/blocks.py: per shard for a
reduce-scatter), the window of outstanding slots (the job's slot range; every slot's state, its round
included, in one table: workers/slots.py), exponent agreement (docs/quantization.md), the
protocol v2 fields of each DATA (workers, klog2, length; dest per block; the caller's NONFINITE
flag per block), retransmission on timeout with backoff (workers/recovery.py decides, this
sends), accepting each result once (workers/acceptance.py: an ACK for a chunk another rank
owns; a REJECT fails the call), placing it by offset, checking what the switch returned,
statistics, and the no-progress deadline.

Schedule (W = number of slots used, nb = number of blocks): slot i carries, in order, a
bootstrap use (block i - W: zeros, proposal for block i), then blocks i, i + W, i + 2W, ...
The packet of block b is quantized with E_b (learned from the result of the slot's previous
use) and carries the proposal for block b + W.  Every use of a slot takes the slot's next round
(its low bit is the shadow set); rounds continue across calls of one job registration, so the
round each slot takes next is returned (`next_rounds`) for the next call.

Two faces over one implementation:
* `start/receive/tick` take and return bytes and events (`Step`): tests, the oracle, several
  cores over one socket (netsum.training.lanes);
* `start_frames/receive_frames/tick_frames` are the hot path of `netsum.workers.allreduce`: results
  are read in place from a batch of receive buffers (memoryviews), and what to send is a list of
  slot numbers whose packets sit ready in `frames` (workers/window.py: one buffer per window,
  the transport's frame prefix included).  No per-packet Python object is made: no bytes, no
  events, no tuples on heaps; result values are copied into one preallocated buffer and
  converted to float32 by one vectorised pass in `result()`.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import cast

import numpy as np
import numpy.typing as npt

from netsum.wire import DEST_ALL, EXP_ZERO, HEADER_BYTES, ROUND_BITS, Flags
from netsum.workers import quant, wire
from netsum.workers.acceptance import ResultAcceptance
from netsum.workers.blocks import BlockPlan, plan_blocks
from netsum.workers.coretypes import (ALLOWED_CALLS, TRANSITIONS, AgreementError, AllreduceResult,
                               ChunkDone, CoreState, DuplicateResult, Event, Finished, JobConfig,
                               Rejected, Retransmitted, StaleResult, Stats, Step, Timing,
                               Trigger)
from netsum.workers.errors import NonFiniteError, ProtocolStateError, ResultError, WorkerTimeoutError
from netsum.workers.recovery import LossRecovery
from netsum.workers.slots import Rounds, SlotTable
from netsum.workers.status import StatusBook
from netsum.workers.window import TxWindow

__all__ = [
    "JobConfig", "Timing", "CoreState", "Trigger", "TRANSITIONS", "ALLOWED_CALLS",
    "Event", "ChunkDone", "Retransmitted", "DuplicateResult", "StaleResult", "Rejected",
    "Finished", "Step", "Stats", "AllreduceResult", "WorkerCore", "AgreementError",
]

_ROUND_SPAN = 1 << ROUND_BITS
_SLOT_ROUND = wire.field_reader(("slot", "round"))
_NONFINITE = int(Flags.NONFINITE)
_RETX = int(Flags.RETX)


class WorkerCore(ResultAcceptance):
    """One worker's side of one all-reduce (or reduce-scatter) of one tensor.  `prefix`: bytes
    every frame in `frames` starts with (a transport's link-layer headers; see
    workers/window.py).

    `rank`: this worker's rank in the job (the position the controller gave it; only named in
    errors for an all-reduce).  `shards`: a reduce-scatter: rank r owns the next `shards[r]`
    elements (one length per member, adding up to the tensor's); each shard's blocks go to the
    switch with `dest` = its owner, and `result()` returns this rank's shard alone.
    `nonfinite`: per block of `blocks` (see `plan_blocks(len, k, shards)`), whether the
    caller's tensor held Inf/NaN there; the block's DATA carries NONFINITE and the result's
    `flags` has the OR over every rank.  The tensor itself must be finite (the caller zeroes
    what it flags)."""

    def __init__(self, tensor: object, job: JobConfig, timing: Timing = Timing(),
                 rounds: Sequence[int] | None = None, prefix: bytes = b"", *,
                 rank: int | None = None, shards: Sequence[int] | None = None,
                 nonfinite: npt.ArrayLike | None = None, predict: npt.ArrayLike | None = None,
                 slack: int = 0) -> None:
        if not isinstance(job, JobConfig):
            raise TypeError(f"job must be a JobConfig, got {type(job).__name__}")
        if not isinstance(timing, Timing):
            raise TypeError(f"timing must be a Timing, got {type(timing).__name__}")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)
                                 or not 0 <= rank < job.num_workers):
            raise ValueError(f"rank must be an integer in 0..{job.num_workers - 1}, got "
                             f"{rank!r}")
        if shards is not None and (rank is None or len(shards) != job.num_workers):
            raise ValueError(f"a reduce-scatter needs this worker's rank and one shard length "
                             f"per member ({job.num_workers})")
        x = quant.as_tensor(tensor)
        # as_tensor accepted `tensor`, so it is array-like (the parameter is `object` because
        # that check is made at run time, with a clear error).
        self._shape = np.shape(cast("npt.ArrayLike", tensor))
        self._job = job
        self._job_id = job.job_id
        self._timing = timing
        self._rank = rank
        k = job.k
        plan = plan_blocks(len(x), k, shards)
        #: the blocks of this call: offsets, owners (workers/blocks.py)
        self.blocks: BlockPlan = plan
        rows = plan.rows(x)
        self._length = len(x)
        self._nb = nb = plan.num_blocks
        # Validates finiteness before anything is sent: a bad gradient never reaches the wire.
        try:
            self._proposals: list[int] = self._propose(rows)
        except NonFiniteError as exc:   # an index into the rows: the tensor's offset instead
            b, j = divmod(exc.offset, k)
            raise NonFiniteError(int(plan.starts[b]) + j, exc.value) from None
        #: per block: the exponent its values are quantized with (dequantize uses it)
        self._agreed = np.zeros(nb, dtype=np.uint8)
        #: per block: the max of every rank's proposal, as the switch returned it
        self._maxima = np.zeros(nb, dtype=np.uint8)
        # Speculative exponents (docs/quantization.md): per block the prediction, and whether
        # its next launch is the retry with the agreed exponent (1) or the speculative use (0).
        self._spec = predict is not None
        self._pred = np.zeros(nb, dtype=np.uint8)
        self._tried = np.zeros(nb, dtype=np.uint8)
        if predict is not None:
            got_p = np.asarray(predict)
            # (uint8, what result.maxima is, needs no range check)
            if got_p.shape != (nb,) or got_p.dtype.kind not in "iu" or \
                    (nb and got_p.dtype != np.uint8 and
                     not 0 <= int(got_p.min()) <= int(got_p.max()) <= 255):
                raise ValueError(f"predict must be {nb} biased exponents in 0..255 (one per "
                                 f"block), got {got_p.dtype} {got_p.shape}")
            self._pred[:] = got_p
        if isinstance(slack, bool) or not isinstance(slack, int) or not 0 <= slack <= 8:
            raise ValueError(f"slack must be an integer in 0..8, got {slack!r}")
        self._slack = slack
        self._misses = 0
        self._offsets: list[int] = plan.starts.tolist()
        self._dests: list[int] = plan.owners.tolist()
        # Whether this rank keeps a block's values (all-reduce: every block).
        self._mine = [d == DEST_ALL or d == rank for d in self._dests]
        if nonfinite is None:
            self._nf = [0] * nb
        else:
            flags = np.asarray(nonfinite)
            if flags.shape != (nb,) or flags.dtype.kind not in "biu":
                raise ValueError(f"nonfinite must be {nb} booleans (one per block), got "
                                 f"{flags.dtype} {flags.shape}")
            self._nf = [_NONFINITE if f else 0 for f in flags.tolist()]
        self._rflags = np.zeros(nb, dtype=np.uint8)     # the RESULTs' NONFINITE per block
        self._acks_owned = 0
        # Checked without a Python loop over the slots: a call of a few packets (a training
        # bucket) must not pay for all of them (type() is int: no bool, no other int type).
        # (rounds a previous call's next_rounds made are checked already: type Rounds)
        got = [0] * job.num_slots if rounds is None else list(rounds)
        trusted = type(rounds) is Rounds and len(got) == job.num_slots
        if rounds is not None and not trusted and (
                len(got) != job.num_slots or not set(map(type, got)) <= {int} or
                (got and not 0 <= min(got) <= max(got) < _ROUND_SPAN)):
            raise ValueError(f"rounds must be {job.num_slots} integers in 0..2^{ROUND_BITS}-1 "
                             "(one per slot)")
        w = min(job.num_slots, nb)
        self._w = w
        self._k = k
        self._win = TxWindow(rows, job.job_id, w, quant.scale_shift(job.num_workers), prefix,
                             workers=job.num_workers, length=len(x))
        #: per slot: the frame to send (prefix + packet), as the transport sends it
        self.frames = self._win.frames
        # Result values by block, big-endian as received; result() converts them in one pass.
        self._sums = self._sums_buffer(nb * 4 * k)
        self._sums_mv = memoryview(self._sums)
        #: the caller's output array (write_into), or None: result() makes one
        self._dst: np.ndarray | None = None
        #: every slot's state: the use in flight, its round, timer and transmissions
        #: (workers/slots.py); its rounds are every slot of the job's
        self._slots = SlotTable(w, got, timing.rto_initial, timing.fast_retransmit > 0)
        #: the RTT estimate, RTO, fast retransmit and the congestion window over them
        self._rec = LossRecovery(self._slots, timing)
        self._active = 0                # slots with blocks still to send or answer
        self._pending: list[int] = []   # heap of blocks whose slot is free, waiting for cwnd
        self._size = self.packet_bytes = HEADER_BYTES + 4 * k   # a netsum packet's length
        self._zeros = bytes(4 * k)
        self._latency = np.zeros(nb)
        self._state = CoreState.IDLE
        self._running = False
        self._started = self._finished = self._progress = 0.0
        self._deadline_at = math.inf    # _progress + progress_deadline
        self._sent = self._retx = self._fast = self._boot = self._results = 0
        self._misses = 0
        self._dups = self._stale = self._rejected = self._chunks = 0
        self._last_reject = ""
        self._ev: list[Event] | None = None   # events are recorded only for the Step API
        # The calls of the frames API so far: the slot table's `qcall` says which call queued
        # a slot's frame last, since a row must not change under a frame queued but not yet
        # sent (see _keep).
        self._call = 0
        #: STATUS frames of this job received (see on_status)
        self.status_frames = 0
        self.status = StatusBook(job.num_workers)     # what they said (workers/status.py)
        self._status_at = 0.0

    def _propose(self, rows: np.ndarray) -> list[int]:
        """Per block of the (nb, k) rows, this worker's exponent proposal; NonFiniteError
        (an index into the rows) for the first NaN/Inf."""
        props: list[int] = quant.block_exponents(rows.reshape(-1), self._job.k).tolist()
        return props

    def _sums_buffer(self, size: int) -> bytearray:
        """Where `_accept` keeps the results' values (big-endian int32 by block)."""
        return bytearray(size)

    def write_into(self, out: np.ndarray) -> None:
        """Have `result()` write the sum into `out` (a writable, C-contiguous float32 array of
        the result's size: the tensor's, or this rank's shard's) and return it as the result's
        `tensor`, as torch's in-place all_reduce does.  Before `start`.  `out` may be the
        input tensor itself: a block's input is read only when it is first sent (its
        retransmissions send the frame kept from then), before its result can come.  On an
        error the contents of `out` are undefined."""
        self._check("start")
        size = self._result_length()
        if not isinstance(out, np.ndarray) or out.dtype != np.float32 or \
                not out.flags.c_contiguous or not out.flags.writeable or out.size != size:
            got = f"{out.dtype} {out.shape}" if isinstance(out, np.ndarray) else \
                type(out).__name__
            raise ValueError(f"out must be a writable C-contiguous float32 array of {size} "
                             f"elements, got {got}")
        self._dst = out

    def _result_length(self) -> int:
        """How many elements result() returns: the tensor's, or this rank's shard's."""
        if self.blocks.shards:
            assert self._rank is not None
            return self.blocks.shards[self._rank][1]
        return self._length

    # -- state machine -----------------------------------------------------------------------

    @property
    def state(self) -> CoreState:
        return self._state

    def _check(self, call: str) -> None:
        if self._state not in ALLOWED_CALLS[call]:
            raise ProtocolStateError(f"{call}() is not allowed in state {self._state.value}")

    def _fire(self, trigger: Trigger) -> None:
        self._state = TRANSITIONS[(self._state, trigger)]
        self._running = self._state is CoreState.RUNNING

    # -- the Step API (bytes in, bytes and events out) ---------------------------------------

    def _step(self, slots: list[int]) -> Step:
        payloads = self._win.payloads
        ev = self._ev
        self._ev = None
        return Step(tuple(bytes(payloads[i]) for i in slots), tuple(ev or ()))

    def start(self, now: float) -> Step:
        """Begin: the bootstrap packets of every slot in use."""
        self._ev = []
        try:
            return self._step(self.start_frames(now))
        finally:
            self._ev = None

    def receive(self, payload: bytes, now: float) -> Step:
        """One received netsum payload (UDP payload).  Never raises for bad packets: they are
        counted and reported as `Rejected`; the only errors are results that cannot be right
        (`ResultError`, e.g. a broken exponent agreement) and the switch's REJECT of this
        worker's DATA (`RejectedError`, naming the mismatch)."""
        self._check("receive")
        self._ev = []
        try:
            if not isinstance(payload, (bytes, bytearray, memoryview)) or \
                    len(payload) not in (self._size, HEADER_BYTES):
                self._reject(payload)
                return self._step([])
            out = self._begin()
            if len(payload) == HEADER_BYTES:          # an ACK or a REJECT
                self._take_bare(memoryview(payload), now, out)
            else:
                self._take(memoryview(payload), now, out)
            if self._win.todo:
                self._win.flush()
            return self._step(out)
        finally:
            self._ev = None

    def tick(self, now: float) -> Step:
        """Retransmit what timed out; raise WorkerTimeoutError after the progress deadline."""
        self._ev = []
        try:
            return self._step(self.tick_frames(now))
        finally:
            self._ev = None

    # -- the frames API (the hot path) -------------------------------------------------------

    def start_frames(self, now: float) -> list[int]:
        """Begin: the slots whose `frames` to send (every slot's bootstrap use)."""
        self._check("start")
        self._fire(Trigger.START)
        self._started = self._progress = now
        self._deadline_at = now + self._timing.progress_deadline
        # ascending: already a heap; without predictions every slot starts with its bootstrap
        first = 0 if self._spec else -self._w
        self._pending.extend(range(first, first + self._w))
        self._active = self._w
        self._rec.start(now)
        out = self._begin()
        self._pump(now, out)
        if self._win.todo:            # speculative first uses carry values
            self._win.flush()
        return out

    def receive_frames(self, payloads: Sequence[memoryview], n: int, now: float) -> list[int]:
        """Results in payloads[0:n] (each exactly HEADER_BYTES + 4K bytes; a transport hands
        anything else, ACKs and REJECTs included, to `receive`): the slots whose `frames` to
        send now, in order.  The buffers may be reused as soon as this returns."""
        self._check("receive")
        out = self._begin()
        take = self._take
        for j in range(n):
            take(payloads[j], now, out)
        if self._win.todo:
            self._win.flush()
        return out

    def tick_frames(self, now: float) -> list[int]:
        """Retransmit what timed out (the slots whose `frames` to send); raise
        WorkerTimeoutError after the progress deadline."""
        self._check("tick")
        if not self._running:
            return []
        # Same expression as next_deadline(): (a + b) - a may be < b in floating point, and a
        # caller woken at next_deadline() must see the deadline as passed.
        if now >= self._deadline_at:
            self._fire(Trigger.NO_PROGRESS)
            self._timed_out(now)
        out = self._begin()
        if now < self._rec.next_timer():
            return out                   # no timer may fire (a lower bound, as tmin)
        self._expire(now, out)
        return out

    def _timed_out(self, now: float) -> None:
        waiting = self._slots.waiting()
        rounds = self._slots.round
        who = self.status.explain(self._job_id, [(i, rounds[i]) for i in waiting], now)
        raise WorkerTimeoutError(
            f"{who}; no result for {now - self._progress:.2f}s (deadline "
            f"{self._timing.progress_deadline:g}s); {self._chunks}/{self._nb} chunks done, "
            f"{len(waiting)} slots waiting (first: {waiting[:8]}); is every one of the "
            f"{self._job.num_workers} workers running and the switch configured for this job?"
            + (f" ({self._rejected} packets rejected, last: {self._last_reject})"
               if self._rejected else ""))

    def next_deadline(self) -> float | None:
        """When tick() next may have work: the progress deadline, or a time no later than the
        earliest retransmission (a tick() before it does nothing and makes this exact)."""
        if not self._running:
            return None
        return min(self._rec.next_timer(), self._deadline_at)

    # -- receiving ---------------------------------------------------------------------------

    def on_status(self, payload: memoryview) -> None:
        """ResultAcceptance.on_status, and the loss recovery told which use the switch holds
        this worker's copy of (a probe it answers found no loss: workers/recovery.py)."""
        super().on_status(payload)
        slot, round_ = _SLOT_ROUND(payload)
        self._held(slot, round_)

    def _held(self, slot: int, round_: int) -> None:
        """A STATUS for (slot, round_): the compiled core tells its own recovery instead."""
        self._rec.status(slot, round_)

    def _accept(self, i: int, block: int, round_: int, exp: int, flags: int,
                view: memoryview | None, now: float, out: list[int]) -> None:
        """The result of slot i's use in flight (values in `view`, or None for the ACK of a
        chunk another rank owns): check what can be checked, keep what is this rank's, agree
        the exponent of the slot's next block and move the slot on."""
        hit = True
        if self._spec:
            hit = self._verdict(i, block, exp)
            # a hit: on to the slot's next block; a miss: the same block again
            ahead = block + self._w if hit else block
        elif block < 0 and view is not None and view[HEADER_BYTES:] != self._zeros:
            # Every worker's bootstrap carries zeros, so their sum is zero whatever the switch
            # held: anything else is a sum the switch got wrong (or added twice).
            raise ResultError(
                f"job {self._job_id} slot {i} round {round_}: the bootstrap result (a sum "
                f"of zeros) is not zero; the switch added something that was not sent for "
                "this round")
        if self._spec:
            pass
        elif (ahead := block + self._w) < self._nb:
            if exp < self._proposals[ahead]:
                raise AgreementError(
                    f"job {self._job_id} slot {i}: result agrees exponent "
                    f"{exp} for block {ahead}, below this worker's proposal "
                    f"{self._proposals[ahead]}; the switch must return max(exp)")
            self._agreed[ahead] = self._maxima[ahead] = exp
            self._win.agree(ahead, exp)
        elif exp != EXP_ZERO:
            # No block follows: every worker (same tensor length) proposed EXP_ZERO.
            raise AgreementError(
                f"job {self._job_id} slot {i}: result agrees exponent {exp} where every "
                f"worker proposed {EXP_ZERO} (no block follows); the switch must return "
                "max(exp)")
        slots = self._slots
        rtt = now - slots.first_sent[i]
        if block >= 0 and hit:
            if view is not None and self._mine[block]:
                size = 4 * self._k
                self._sums_mv[block * size:(block + 1) * size] = view[HEADER_BYTES:]
            self._rflags[block] = flags & _NONFINITE
            self._latency[block] = rtt
            self._chunks += 1
            if self._ev is not None:
                self._ev.append(ChunkDone(block, block * self._k, rtt))
        slots.accept(i)          # idle, on to its next round
        self._results += 1
        self._progress = now
        self._deadline_at = now + self._timing.progress_deadline
        j = self._rec.answered(i, rtt, now)
        if j >= 0:
            self._retransmit(j, now, True, out)
            self._rec.grow()
        if ahead < self._nb:
            heapq.heappush(self._pending, ahead)
        else:
            self._active -= 1
            if self._active == 0:
                self._fire(Trigger.LAST_RESULT)
                self._finished = now
                if self._ev is not None:
                    self._ev.append(Finished(now - self._started))
        if self._running:
            self._pump(now, out)

    def _verdict(self, i: int, block: int, m: int) -> bool:
        """Speculative mode: whether the use of `block` just answered, whose result says the
        max of every rank's proposal is `m`, was quantized with a good exponent (a hit: the
        values count) or must be sent again with `m` (a miss); docs/quantization.md."""
        if m < self._proposals[block]:
            raise AgreementError(
                f"job {self._job_id} slot {i}: result says exponent {m} is the max of the "
                f"proposals for block {block}, below this worker's own proposal "
                f"{self._proposals[block]}; the switch must return max(exp)")
        self._maxima[block] = m
        if self._tried[block]:
            if m != self._agreed[block]:
                raise AgreementError(
                    f"job {self._job_id} slot {i}: block {block} was sent again with the "
                    f"exponent {self._agreed[block]} its first result agreed, and its second "
                    f"result says {m}; the data did not change, so the max cannot")
            return True
        p = int(self._pred[block])
        if m == EXP_ZERO or m <= p <= m + self._slack:
            self._agreed[block] = EXP_ZERO if m == EXP_ZERO else p
            return True
        self._agreed[block] = m
        self._tried[block] = 1
        self._misses += 1
        return False

    def _qexp_of(self, block: int) -> int:
        """The exponent the values of a use of `block` (< 0: a bootstrap use) are quantized
        with: what its DATA carries in byte 18 (the `reason` field)."""
        if block < 0:
            return EXP_ZERO
        if self._spec and not self._tried[block]:
            return int(self._pred[block])
        return int(self._agreed[block])

    # -- sending -----------------------------------------------------------------------------

    def _begin(self) -> list[int]:
        """A new call of the frames API: the list of what it sends, copies of the last call
        gone (the transport has sent them)."""
        self._call += 1
        if len(self.frames) > self._w:
            self._win.unspill()
        return []

    def _keep(self, i: int, out: list[int]) -> None:
        """Slot i's row is about to change but this call already queued it (a retransmission,
        then the result of that very use in the same batch): what was queued goes out as it
        was, from a copy, so the wire sees what one call per packet would have sent."""
        if self._win.todo:
            self._win.flush()
        out[self._slots.qpos[i]] = self._win.spill(i)

    def _pump(self, now: float, out: list[int]) -> None:
        """Launch pending blocks, lowest first, while the window allows.  A pending block
        below every block in flight is launched even into a full window: otherwise workers
        whose windows filled in different orders could each wait for a block the other holds
        back.  With it, the lowest block not yet done everywhere can always be sent by every
        worker, so the job always progresses (docs/protocol.md, "Window").

        A launch: the slot's row gets the use's header words (its values are quantized by
        the window's flush at the end of the call) and the slot table the use
        (`SlotTable.launch`: its timer, its transmission's sequence number, its place in
        `out`)."""
        pending = self._pending
        if not pending:
            return
        w, nb = self._w, self._nb
        win, todo, props = self._win, self._win.todo, self._proposals
        slots, rec = self._slots, self._rec
        launch, qcall, call = slots.launch, slots.qcall, self._call
        offsets, dests, nf = self._offsets, self._dests, self._nf
        rounds = slots.round
        base = rec.base_rto
        spec, pred, tried, agreed = self._spec, self._pred, self._tried, self._agreed
        while pending:
            block = pending[0]
            if slots.in_flight >= rec.cwnd and block > slots.lowest_in_flight(block):
                break
            heapq.heappop(pending)
            i = block % w
            if qcall[i] == call:
                self._keep(i, out)
            if spec:
                # this worker's proposal for the block itself; the values quantized with the
                # prediction (zeros if the block exceeds it: a miss for every rank, and no
                # overflow), or on the retry with the exponent its first result agreed
                if tried[block]:
                    qexp = qe = int(agreed[block])
                else:
                    qexp = int(pred[block])
                    qe = qexp if props[block] <= qexp else EXP_ZERO
                win.agree(block, qe)
                offset = offsets[block]
                win.launch(i, props[block], rounds[i], offset, dests[block], nf[block], qexp)
                todo.append(block)
                launch(i, block, offset, now, base, call, len(out))
                self._sent += 1
                out.append(i)
                continue
            ahead = block + w
            # A bootstrap use (block < 0) is tagged with the offset of the block it proposes
            # for, and its (zero) values go to every rank.
            exp = props[ahead] if ahead < nb else EXP_ZERO
            if block >= 0:
                offset = offsets[block]
                win.launch(i, exp, rounds[i], offset, dests[block], nf[block],
                           int(agreed[block]))
                todo.append(block)
            else:
                offset = offsets[ahead]
                win.launch(i, exp, rounds[i], offset, DEST_ALL, 0)
                self._boot += 1      # its values are zeros, as the row is from allocation
            launch(i, block, offset, now, base, call, len(out))
            self._sent += 1
            out.append(i)

    # -- loss recovery (workers/recovery.py decides; this sends) -----------------------------

    def _expire(self, now: float, out: list[int]) -> None:
        """Send again the uses whose timer is due (as many as the window allows)."""
        for i in self._rec.expire(now):
            self._retransmit(i, now, False, out)

    def _retransmit(self, i: int, now: float, fast: bool, out: list[int]) -> None:
        """Slot i's use again, with RETX set (`fast`: on a gap, not a timer)."""
        slots = self._slots
        if slots.qcall[i] == self._call:
            self._keep(i, out)
        slots.resend(i, now, self._call, len(out))
        self._sent += 1
        self._retx += 1
        if fast:
            self._fast += 1
        self._win.set_flag(i, _RETX)
        if self._ev is not None:
            self._ev.append(Retransmitted(i, slots.block[i], slots.attempts[i], fast))
        out.append(i)

    # -- results -----------------------------------------------------------------------------

    def stats(self, now: float | None = None) -> Stats:
        end = self._finished if self._state is CoreState.DONE else (
            self._progress if now is None else now)
        return Stats(self._sent, self._retx, self._boot, self._results, self._dups, self._stale,
                     self._rejected, self._chunks, end - self._started, self._latency.copy(),
                     self._fast, self._rec.spurious, self._misses)

    def next_rounds(self) -> tuple[int, ...]:
        """Per slot of the job, the round its next use takes: the next call of the same job
        registration starts there (slots this call did not use keep theirs)."""
        return self._slots.next_rounds()

    def result(self) -> AllreduceResult:
        """The sum: the input's shape (all-reduce), or this rank's shard (reduce-scatter,
        1-D), or the caller's `out` (write_into); `flags` per block: where some rank's tensor
        held Inf/NaN.  `bound` is computed when it is read (a float64 per element)."""
        self._check("result")
        job, plan = self._job, self.blocks
        agreed, shape = self._agreed, self._shape
        b0, b1 = 0, self._nb
        length = self._result_length()
        if plan.shards:
            assert self._rank is not None
            b0, b1 = plan.blocks_of(self._rank)
            agreed = agreed[b0:b1]
            shape = (length,)
        out = self._values(b0, b1, length)
        tensor = out.reshape(shape) if self._dst is None else self._dst
        return AllreduceResult(tensor, self.stats(), self.next_rounds(), self._agreed.copy(),
                               (agreed.copy(), job.num_workers, job.k, length),
                               self._rflags.copy(), plan, self._maxima.copy())

    def _values(self, b0: int, b1: int, length: int) -> np.ndarray:
        """The result's `length` float32 values (flat) from blocks b0..b1-1 of the sums: into
        `_dst` when the caller gave one."""
        if not length:
            return np.zeros(0, dtype=np.float32)      # a rank whose shard is empty
        sums = np.frombuffer(self._sums, dtype=">i4").reshape(self._nb, self._k)[b0:b1]
        out = quant.dequantize(sums, self._agreed[b0:b1], self._job.num_workers, length)
        if self._dst is not None:
            np.copyto(self._dst.reshape(-1), out)
            return self._dst.reshape(-1)
        return out
