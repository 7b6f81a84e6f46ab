"""Several all-reduces in flight at once over one worker socket (torch-free).

A training job's slot window is split into `lanes`: each lane is a netsum job of its own (its
own job id and slot range, registered by netsum.training.register).  Every rank's lanes share
one transport: all results come back to the rank's one address (membership and multicast
replicas are per host).  One driver thread runs a worker core per busy lane over that transport
with `netsum.workers.driver.Driver`, the loop of `netsum.workers.allreduce`, which hands each
received payload to the core whose job id it carries.  On a frame transport (the UDP tunnel
port of `netsum train`, shared-memory ports, kernel UDP) the cores are the compiled
`NativeCore` and packets move as frames in place, as for netsum-worker (the same
`NETSUM_WORKER_NATIVE` switch and fallback to the Python core, workers/native.py); on any other
transport, or with `delay`, the Python core's Step API.  (A thread per lane behind a receiver
thread was tried first: the hand-offs between threads cost more than the packets, 80-120 ms
for four 1000-float tensors against 35 ms for the same four one after the other.)

Invariants that keep the ranks aligned without any message between them:
- the caller submits tensors in the same order on every rank (DDP reduces buckets in index
  order), and tensor n goes to lane n % lanes, so each lane sees the same sequence of
  tensors on every rank;
- a lane runs its tensors one after the other (a netsum job all-reduces one tensor at a time),
  so lanes are the only concurrency: at most `lanes` tensors are on the wire at once.

Speculative exponents (docs/quantization.md): a tensor's block exponents are predicted from
the maxima of the lane's latest completed tensor with the same caller's key (DDP's bucket
index, for the hook), length and shards, so a tensor whose blocks' magnitudes moved little
since takes one round trip and one packet per block instead of a bootstrap round first.
Only the same lane's history is used: its tensors run one after the other, so every rank has
the same history when a tensor begins (another lane's latest result could have arrived on one
rank and not yet on another, and ranks predicting differently are refused by the switch).

Between the calls of one lane the engine keeps what `workers.Worker` keeps (the round each slot
takes next; the switch holds slot state across calls).  A failure never hangs the caller: a
worker's error (a silent peer after `Timing.progress_deadline`, a broken agreement, a socket
error) fails that tensor's future with a message naming the lane, and every later future of
the lane fails at once (its switch state is unknown).  A tensor the quantizer refuses (not a
float16/32/64 array) fails alone: nothing was sent.

Inf and NaN are carried (netsum.training.nonfinite): the tensor is sanitized, the flags come
back with the result, and when some block is flagged on any rank, every rank runs the mask
round on the same lane before the lane's next tensor, so the lanes stay aligned.  An empty
tensor completes at once and takes no lane (every rank has the same length).

A tensor submitted with `shards` is reduce-scattered in the network (protocol v2's dest
field): the switch sends each block's sums to the rank that owns it and a header-only ACK to
the others, and the result is this rank's shard.  The ACKs carry the block's NONFINITE flag
too, so every rank knows every flagged block; the mask round of a reduce-scatter is an
all-reduce of those blocks' class codes (rare: only a step with Inf/NaN pays it), of which
each rank applies the part of its own shard.
"""
from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from netsum.training.nonfinite import (Carrier, HeaderFlag, default_carrier, mask_round,
                                       rebuild)
from netsum.workers import JobConfig, Timing, WorkerCore, quant
from netsum.workers.blocks import BlockPlan, plan_blocks
from netsum.workers.core import Stats
from netsum.workers.driver import Done, Driver, job_id_of
from netsum.workers.errors import QuantError, SumOverflowError, WorkerError
from netsum.workers.transport import Transport

__all__ = ["LaneSpec", "LaneEngine", "LaneResult", "LaneError", "job_id_of", "PREDICT_ABOVE",
           "PREDICT_SLACK"]

#: A tensor's block exponents are predicted as the lane's previous such tensor's maxima plus
#: PREDICT_ABOVE, and a prediction up to PREDICT_SLACK above the new max is kept (a hit when
#: the max moved by -1..+1 binade; 90 % of a transformer's 1024-element blocks step to step
#: against 42 % for exact predictions): up to 2 bits of a hit block's precision for one round
#: trip and half the packets (docs/quantization.md, "Speculative exponents").
PREDICT_ABOVE = 1
PREDICT_SLACK = 2

class LaneError(RuntimeError):
    """An all-reduce through the switch failed; str() says which lane, tensor and why."""


@dataclass(frozen=True, slots=True)
class LaneSpec:
    """One lane: the netsum job it all-reduces through."""
    job: JobConfig


@dataclass(frozen=True, slots=True)
class LaneResult:
    tensor: np.ndarray       # float32 sum over the ranks
    bound: np.ndarray        # per element: the quantization bound of the sum (docs/quantization.md)
    lane: int
    submitted: float         # monotonic clock: when submit() was called
    started: float           # when the lane began sending it
    finished: float          # when the sum was complete


@dataclass(slots=True)
class _Task:
    tensor: np.ndarray
    label: str
    future: Future[LaneResult]
    submitted: float
    lane: int
    # The mask round of a first round that came back with flagged blocks (nonfinite.py):
    # the first round's result and the flagged blocks.
    first: LaneResult | None = None
    flagged: np.ndarray | None = None
    codes: np.ndarray | None = None        # first round: its class codes, kept for round two
    sanitized: quant.Sanitized | None = None
    shards: tuple[int, ...] | None = None  # a reduce-scatter: every rank's shard length
    plan: BlockPlan | None = None          # a reduce-scatter's mask round: the first's blocks
    key: object = None                     # the caller's name for the tensor (a bucket index)
    history: tuple[object, ...] | None = None   # where its maxima are kept for the next one


@dataclass(slots=True)
class _Lane:
    spec: LaneSpec
    queue: deque[_Task] = field(default_factory=deque)
    core: WorkerCore | None = None
    task: _Task | None = None
    started: float = 0.0
    rounds: tuple[int, ...] | None = None    # the round each slot takes next (None: all 0)
    broken: str | None = None
    # per (key, length, shards): the maxima of the lane's latest such tensor, what the next
    # one's exponents are predicted from
    history: dict[tuple[object, ...], np.ndarray] = field(default_factory=dict)


class LaneEngine:
    """All-reduce float32 arrays through `lanes` netsum jobs over one transport.

    `submit(x, label)` returns a `concurrent.futures.Future` at once; the n-th tensor since
    the last `reset_order()` goes to lane `n % len(lanes)`.  `close()` stops the driver
    thread, fails what is still queued, and closes the transport."""

    _IDLE_WAIT = 0.005   # seconds the driver waits in receive() before looking for new tensors

    def __init__(self, transport: Transport, lanes: Sequence[LaneSpec],
                 timing: Timing = Timing(), delay: float = 0.0,
                 clock: Callable[[], float] = time.monotonic,
                 carrier: Carrier | None = None, rank: int | None = None,
                 speculate: bool = True) -> None:
        """`rank`: this process's rank in the lanes' jobs, needed for `submit(..., shards=)`.
        `speculate`: predict each tensor's block exponents from the lane's latest tensor of
        the same key, length and shards (see the module's docstring); the same on every
        rank."""
        if not lanes:
            raise ValueError("a LaneEngine needs at least one lane")
        ids = [spec.job.job_id for spec in lanes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"lanes must have distinct job ids, got {ids}")
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        self._transport = transport
        # Every lane's packets have one length where frames move in place (the transport's
        # receive rows are cut for it); a delay holds payloads back, so they are copied.
        frames = delay == 0 and len({spec.job.k for spec in lanes}) == 1
        self._driver = Driver(transport if not delay else _Delayed(transport, delay, clock),
                              clock, frames=frames, quiet=ids)
        self._specs = tuple(lanes)
        self._lanes = [_Lane(spec) for spec in lanes]
        self._by_job = {spec.job.job_id: lane for spec, lane in zip(lanes, self._lanes)}
        self._timing = timing
        self._delay = delay
        self._clock = clock
        self.carrier: Carrier = carrier or default_carrier()
        self._rank = rank
        self._speculate = speculate
        self.mask_rounds = 0      # mask rounds run (tensors some rank sent with Inf/NaN)
        self._inbox: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._count = 0
        self._lock = threading.Lock()
        self._closed = False
        self._fatal: str | None = None
        self.stats: deque[Stats] = deque(maxlen=1024)   # of the latest all-reduces
        #: since the start, over every all-reduce that completed: packets sent (bootstrap and
        #: retransmissions included), retransmissions, bootstrap packets, speculative uses
        #: sent again (predictions that missed), blocks sent with a prediction
        self.totals = {"packets": 0, "retransmissions": 0, "bootstrap": 0, "misses": 0,
                       "predicted": 0}
        self._thread = threading.Thread(target=self._run, name="netsum-lanes", daemon=True)
        self._thread.start()

    @property
    def deadline(self) -> float:
        """The workers' no-progress deadline (seconds)."""
        return self._timing.progress_deadline

    @property
    def foreign(self) -> int:
        """Received payloads of no lane (other jobs, garbage)."""
        return self._driver.foreign

    @property
    def native(self) -> bool:
        """Whether the lanes run the compiled core over frames in place (workers/native.py)."""
        return self._driver.native

    @property
    def lanes(self) -> tuple[LaneSpec, ...]:
        return self._specs

    @property
    def can_scatter(self) -> bool:
        """Whether `submit(..., shards=)` is available: the engine knows its rank and Inf/NaN
        ride in the header's flag (the exponent sentinel would need the owners' values)."""
        return self._rank is not None and isinstance(self.carrier, HeaderFlag)

    def submit(self, tensor: np.ndarray, label: str = "",
               shards: Sequence[int] | None = None, key: object = None) -> Future[LaneResult]:
        """`tensor`: float16, float32 or float64 (Inf/NaN allowed); the sum comes back as
        float32.  With `shards` (one length per rank, adding up to the tensor's length, the
        same on every rank): an in-network reduce-scatter, whose result is this rank's
        shard.  `key`: what the tensor is across steps (DDP's bucket index; the same on
        every rank), for the exponent predictions."""
        if shards is not None and not self.can_scatter:
            raise ValueError("this LaneEngine cannot reduce-scatter (no rank given, or Inf/NaN "
                             f"carried by the {self.carrier.name})")
        fut: Future[LaneResult] = Future()
        x = np.asarray(tensor)
        if x.dtype.kind != "f":
            x = x.astype(np.float32)   # refused by the quantizer with its own message
        x = np.ascontiguousarray(x.reshape(-1))
        if x.size == 0:
            now = self._clock()
            empty = np.zeros(0, dtype=np.float32)
            fut.set_result(LaneResult(empty, np.zeros(0), -1, now, now, now))
            return fut
        with self._lock:
            n = self._count
            self._count += 1
            closed = self._closed
        task = _Task(x, label or f"tensor {n}", fut, self._clock(), n % len(self._lanes),
                     shards=None if shards is None else tuple(int(v) for v in shards),
                     key=key)
        if closed:
            fut.set_exception(LaneError(f"netsum: {task.label}: the engine is closed"))
        else:
            self._inbox.put(task)
        return fut

    def reset_order(self) -> None:
        """Deal the next tensor to lane 0 again.  Call it at the same point on every rank
        (e.g. before the first bucket of each step), so a step with a different number of
        tensors than the last cannot shift the dealing on one rank only."""
        with self._lock:
            self._count = 0

    # -- the driver ------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - every future must learn of it, none may hang
            self._fatal = f"{type(exc).__name__}: {exc}"
        finally:
            why = self._fatal or "the engine was closed"
            for lane in self._lanes:
                if lane.task is not None:
                    self._fail(lane, lane.task, why, broken=False)
                    lane.task, lane.core = None, None
                while lane.queue:
                    self._fail(lane, lane.queue.popleft(), why, broken=False)
            while True:
                try:
                    task = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if task is not None:
                    task.future.set_exception(LaneError(f"netsum: {task.label}: {why}"))

    def _loop(self) -> None:
        clock, driver, lanes = self._clock, self._driver, self._lanes
        while True:
            busy = driver.busy or any(lane.queue for lane in lanes)
            if not self._take(block=not busy):
                return
            now = clock()
            for lane in lanes:
                if lane.core is None and lane.queue:
                    self._begin(lane, now)
            if driver.busy:
                for done in driver.poll(self._IDLE_WAIT):
                    self._settle(done)

    def _take(self, block: bool) -> bool:
        """Move submitted tensors to their lanes; False once close() was called."""
        while True:
            try:
                task = self._inbox.get() if block else self._inbox.get_nowait()
            except queue.Empty:
                return True
            block = False
            if task is None:
                return False
            lane = self._lanes[task.lane]
            if lane.broken is not None:
                self._fail(lane, task, f"not sent, an earlier all-reduce of this lane failed "
                                       f"({lane.broken})", broken=False)
            else:
                lane.queue.append(task)

    def _begin(self, lane: _Lane, now: float) -> None:
        task = lane.queue.popleft()
        if task.first is None and not task.future.set_running_or_notify_cancel():
            return
        k = lane.spec.job.k
        try:
            flags = None
            predict = None
            if task.first is None:
                task.sanitized = s = quant.sanitize(task.tensor, k)
                if s.count:
                    task.codes = quant.class_codes(task.tensor)
                values = self.carrier.first_round(s, k)
                flags = self.carrier.core_flags(s)
                if task.shards is not None:
                    # flags per block of the reduce-scatter's plan (shards cut blocks apart);
                    # none to send when this rank's tensor is all finite
                    flags = None
                    if task.codes is not None:
                        plan = plan_blocks(len(values), k, task.shards)
                        bad = task.codes != 0
                        flags = np.array([bad[a:a + m].any()
                                          for a, m in zip(plan.starts, plan.sizes)])
                if self._speculate:
                    task.history = (task.key, len(values), task.shards)
                    predict = lane.history.get(task.history)
            else:
                values = task.tensor
            core = self._core(values, lane, flags, task.shards, predict)
        except (QuantError, ValueError) as exc:
            # Refused before anything was sent: the switch and the lane are untouched.
            task.future.set_exception(LaneError(f"{self._where(lane, task)}: {exc}"))
            return
        if task.first is None:
            lane.started = now
        lane.core, lane.task = core, task
        self._driver.start(core, now)

    def _core(self, values: np.ndarray, lane: _Lane, flags: np.ndarray | None,
              shards: tuple[int, ...] | None = None,
              maxima: np.ndarray | None = None) -> WorkerCore:
        """`flags`: the v2 core's per-block NONFINITE flags; `shards`: a reduce-scatter;
        `maxima`: the lane's previous such tensor's, to predict the exponents from."""
        predict = None
        if maxima is not None:
            # one above the previous max, accepted up to two above the new one: a hit when
            # the max moved by at most one binade either way (docs/quantization.md)
            predict = np.minimum(maxima.astype(np.int16) + PREDICT_ABOVE, 255)
            self.totals["predicted"] += len(predict)
        return self._driver.core(values, lane.spec.job, self._timing, lane.rounds,
                                 rank=None if shards is None else self._rank, shards=shards,
                                 nonfinite=flags, predict=predict,
                                 slack=PREDICT_SLACK if predict is not None else 0)

    def _settle(self, done: Done) -> None:
        """A lane's core left the driver: its tensor's result, or the lane broken."""
        core = done.core
        lane = self._by_job[core._job_id]
        task = lane.task
        assert lane.core is core and task is not None
        lane.core, lane.task = None, None
        if done.error is not None:
            self._fail(lane, task, f"{type(done.error).__name__}: {done.error}", broken=True)
            return
        try:
            res = core.result()
        except SumOverflowError as exc:
            lane.rounds = core.next_rounds()   # the round completed: the slots are known
            task.future.set_exception(LaneError(f"{self._where(lane, task)}: {exc}"))
            return
        except WorkerError as exc:
            self._fail(lane, task, f"{type(exc).__name__}: {exc}", broken=True)
            return
        lane.rounds = res.next_rounds
        if task.history is not None:
            lane.history[task.history] = res.maxima
        self.stats.append(res.stats)
        totals = self.totals
        totals["packets"] += res.stats.packets_sent
        totals["retransmissions"] += res.stats.retransmissions
        totals["bootstrap"] += res.stats.bootstrap_packets
        totals["misses"] += res.stats.misses
        out = LaneResult(np.asarray(res.tensor, np.float32).reshape(-1), res.bound,
                         self._lanes.index(lane), task.submitted, lane.started, done.at)
        self._finish(lane, task, out, res)

    def _finish(self, lane: _Lane, task: _Task, out: LaneResult, res: object) -> None:
        """A round is complete: the tensor's result, or its mask round first (queued at the
        head of the lane, so it runs before the lane's next tensor on every rank)."""
        k = lane.spec.job.k
        carrier = self.carrier
        if task.first is None:
            # the maxima, not the exponents used: a prediction may sit above the sentinel's
            flagged = carrier.flagged(getattr(res, "maxima"), getattr(res, "flags", None))
            if not len(flagged):
                task.future.set_result(out)
                return
            if task.shards is not None:
                self._scatter_mask_round(lane, task, out, getattr(res, "blocks"), flagged)
                return
            s = task.sanitized
            assert s is not None
            codes = task.codes if task.codes is not None else np.zeros(len(s.values), np.float32)
            second = _Task(mask_round(s, codes, flagged, k, carrier.resend_values),
                           f"{task.label}, mask round ({len(flagged)} blocks with Inf/NaN)",
                           task.future, task.submitted, task.lane, first=out, flagged=flagged)
            self.mask_rounds += 1
            lane.queue.appendleft(second)
            return
        assert task.flagged is not None
        first = task.first
        if task.plan is not None:
            self._scatter_rebuild(task, first, out)
            return
        try:
            tensor = rebuild(first.tensor, out.tensor, task.flagged, k, carrier.resend_values)
        except (QuantError, ValueError) as exc:
            task.future.set_exception(LaneError(f"{self._where(lane, task)}: {exc}"))
            return
        bound = first.bound
        if carrier.resend_values:
            rows = quant.blocks(np.asarray(first.bound, dtype=np.float64), k).copy()
            n = len(task.flagged)
            rows[task.flagged] = np.asarray(out.bound[:n * k]).reshape(n, k)
            bound = rows.reshape(-1)[:len(first.tensor)]
        task.future.set_result(LaneResult(tensor, bound, first.lane, first.submitted,
                                          first.started, out.finished))

    def _scatter_mask_round(self, lane: _Lane, task: _Task, out: LaneResult, plan: BlockPlan,
                            flagged: np.ndarray) -> None:
        """Queue a reduce-scatter's mask round: an all-reduce of the flagged blocks' class
        codes (their real elements, in block order; the same length on every rank)."""
        codes = task.codes if task.codes is not None else np.zeros(plan.length, np.float32)
        parts = [codes[int(plan.starts[b]):int(plan.starts[b]) + int(plan.sizes[b])]
                 for b in flagged]
        second = _Task(np.concatenate(parts).astype(np.float32),
                       f"{task.label}, mask round ({len(flagged)} blocks with Inf/NaN)",
                       task.future, task.submitted, task.lane, first=out, flagged=flagged,
                       plan=plan)
        self.mask_rounds += 1
        lane.queue.appendleft(second)

    def _scatter_rebuild(self, task: _Task, first: LaneResult, out: LaneResult) -> None:
        """This rank's shard with its flagged blocks' elements rebuilt from the code sums."""
        plan, flagged = task.plan, task.flagged
        assert plan is not None and flagged is not None and self._rank is not None
        shard = first.tensor.copy()
        start = plan.shards[self._rank][0]
        at = 0
        try:
            for b in flagged:
                a, m = int(plan.starts[b]), int(plan.sizes[b])
                if plan.owners[b] == self._rank:
                    shard[a - start:a - start + m] = quant.apply_classes(
                        shard[a - start:a - start + m], out.tensor[at:at + m])
                at += m
        except (QuantError, ValueError) as exc:
            task.future.set_exception(LaneError(f"{task.label}: {exc}"))
            return
        task.future.set_result(LaneResult(shard, first.bound, first.lane, first.submitted,
                                          first.started, out.finished))

    def _where(self, lane: _Lane, task: _Task) -> str:
        return (f"netsum lane {self._lanes.index(lane)} (job {lane.spec.job.job_id}), "
                f"{task.label}")

    def _fail(self, lane: _Lane, task: _Task, why: str, broken: bool) -> None:
        if broken:
            lane.broken = why
            while lane.queue:
                queued = lane.queue.popleft()
                queued.future.set_exception(LaneError(
                    f"{self._where(lane, queued)}: not sent, an earlier all-reduce of this "
                    f"lane failed ({why})"))
        if not task.future.done():
            task.future.set_exception(LaneError(f"{self._where(lane, task)}: {why}"))

    def close(self) -> None:
        """Stop the driver (what is queued or running fails) and close the transport."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._inbox.put(None)
        self._thread.join(timeout=5.0)
        self._transport.close()

    def __enter__(self) -> LaneEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Delayed:
    """A transport whose received payloads are held back `delay` seconds (a longer path to
    the switch, for tests and experiments); sends go out at once."""

    def __init__(self, inner: Transport, delay: float, clock: Callable[[], float]) -> None:
        self._inner, self._delay, self._clock = inner, delay, clock
        self._held: deque[tuple[float, bytes]] = deque()   # (release time, payload)

    def send(self, payloads: Iterable[bytes]) -> None:
        self._inner.send(payloads)

    def receive(self, timeout: float) -> list[bytes]:
        held = self._held
        if held:
            timeout = min(timeout, max(0.0, held[0][0] - self._clock()))
        got = self._inner.receive(timeout)
        now = self._clock()
        held.extend((now + self._delay, p) for p in got)
        out = []
        while held and held[0][0] <= now:
            out.append(held.popleft()[1])
        return out

    def close(self) -> None:
        self._inner.close()
