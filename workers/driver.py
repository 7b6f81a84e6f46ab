"""The one loop that drives worker cores over a transport: `Driver`, used by `allreduce` /
`reduce_scatter` (one core, netsum-worker and the rig's workers) and by the training lanes
(netsum.training.lanes: one core per busy lane over the rank's one transport).

Two ways to move packets, chosen once per driver (`Driver.frames`):
* frames -- the transport has the allocation-free hot path (`BatchTransport`: UDP tunnel and
  shared-memory frame ports, kernel UDP) and nobody asked for events: each core sends its own
  frame rows in place, results are drained into the transport's rows and handed to the cores
  as views, never copied into bytes.  The cores are the compiled `NativeCore` where it builds
  (workers/native.py: `NETSUM_WORKER_NATIVE`, the fallback to Python and its one warning),
  else the Python `WorkerCore` on the same path.  All cores of one driver carry packets of
  one length (the transport's rows are cut for it).
* steps -- any `Transport` (bytes in, bytes out), the Python core's Step API with its events.

Several cores: each received payload goes to the core of its job id (`route=True`); a payload
of no core is counted in `foreign` unless its job is one of `quiet` (a lane between calls: a
late duplicate of a finished call, not worth a count).  With `route=False` (one core, as
`allreduce` has always done) every payload goes to the one core, which counts and explains
what is not its own.  Timers fire only once the socket is drained in the frames mode: after a
wake-up, results already waiting (the process was descheduled, not the packets lost) are
taken before any retransmission.

A core leaves the driver when it is no longer running (its result is ready) or when it raised
a `WorkerError` (a refusal, a broken agreement, its deadline, a send error): `poll` returns
both, so one failing lane does not stop the others.  Errors of the transport's receive are
everyone's and propagate.
"""
from __future__ import annotations

import math
import os
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy.typing as npt

from netsum.workers import wire
from netsum.workers.cio import ROUTE, CIo, CycleMany
from netsum.workers.core import CoreState, Event, JobConfig, Step, Timing, WorkerCore
from netsum.workers.errors import WorkerError
from netsum.workers.native import OK as _OK, NativeCore, native_status
from netsum.workers.retxtrace import TracingCore, trace_dir
from netsum.workers.transport import BatchTransport, Transport

__all__ = ["Driver", "Done", "job_id_of", "MANY_ENV"]

#: "0": several compiled cores are routed by the Python loop (over the C receive and sends)
#: instead of one C call per wake-up (CIo.cycle_many)
MANY_ENV = "NETSUM_DRIVER_MANY"


_READ_JOB = wire.field_reader(("job_id",))     # the one header codec's reader


def job_id_of(payload: bytes | memoryview) -> int:
    """The job id of a netsum payload; -1 if it is too short to hold one."""
    try:
        job: int = _READ_JOB(payload)[0]
    except struct.error:
        return -1
    return job


_BATCH_TYPES: dict[type, bool] = {}


def _is_batch(transport: Transport) -> bool:
    """isinstance(transport, BatchTransport), decided once per transport class (a Protocol
    check walks the protocol's attributes: ~40 us, and a driver is made per call)."""
    kind = type(transport)
    ok = _BATCH_TYPES.get(kind)
    if ok is None:
        ok = _BATCH_TYPES[kind] = isinstance(transport, BatchTransport)
    return ok


@dataclass(frozen=True, slots=True)
class Done:
    """A core that left the driver: finished (`error` None, `core.result()` is ready) or
    failed with `error` (the switch's state for its job is unknown)."""
    core: WorkerCore
    error: WorkerError | None
    at: float                       # the clock when it left


class Driver:
    """Drive any number of cores (one per job id) over one transport; see the module
    docstring.  `frames=False` forces the Step API; `on_event` (the Python cores' events)
    forces it too."""

    def __init__(self, transport: Transport, clock: Callable[[], float] = time.monotonic, *,
                 frames: bool = True, on_event: Callable[[Event], None] | None = None,
                 route: bool = True, quiet: Iterable[int] = ()) -> None:
        self._transport = transport
        self._clock = clock
        self._on_event = on_event
        self._route = route
        self._quiet = frozenset(quiet)
        #: whether packets move as frames in place (else the Step API's bytes)
        self.frames = frames and on_event is None and _is_batch(transport)
        # The frames API's transport, checked once here: isinstance against a runtime-
        # checkable Protocol walks its attributes (~40 us), too slow for every wake-up.
        self._batch: BatchTransport | None = \
            cast(BatchTransport, transport) if self.frames else None
        self._native = self.frames and native_status()[0]
        self._cores: dict[int, WorkerCore] = {}
        self._size = 0          # the packet length of the frames mode (set by the first core)
        self._rows: int | None = None   # the transport's receive rows, once known
        self._quiet_t = tuple(self._quiet)
        # several compiled cores in one C wake-up (NETSUM_DRIVER_MANY=0: Python routes them)
        self._many = os.environ.get(MANY_ENV, "").strip() != "0" and \
            hasattr(transport, "receive_cycle_many")
        self.foreign = 0        # payloads of no core (route=True), not of a `quiet` job

    @property
    def native(self) -> bool:
        """Whether `core()` makes compiled cores."""
        return self._native

    @property
    def busy(self) -> bool:
        return bool(self._cores)

    def core(self, tensor: object, job: JobConfig, timing: Timing = Timing(),
             rounds: Sequence[int] | None = None, *, rank: int | None = None,
             shards: Sequence[int] | None = None,
             nonfinite: npt.ArrayLike | None = None, predict: npt.ArrayLike | None = None,
             slack: int = 0) -> WorkerCore:
        """A core for this driver's way of moving packets (WorkerCore's arguments)."""
        if not self.frames:
            return WorkerCore(tensor, job, timing, rounds, rank=rank, shards=shards,
                              nonfinite=nonfinite, predict=predict, slack=slack)
        assert self._batch is not None
        kind: type[WorkerCore] = NativeCore if self._native else WorkerCore
        if trace_dir() is not None:       # benchmarks/spurious.py: the Python core, traced
            kind = TracingCore
        return kind(tensor, job, timing, rounds, self._batch.frame_prefix, rank=rank,
                    shards=shards, nonfinite=nonfinite, predict=predict, slack=slack)

    def start(self, core: WorkerCore, now: float | None = None) -> None:
        """Send `core`'s first window; it is driven from now on (one core per job id)."""
        job = core._job_id
        if job in self._cores:
            raise ValueError(f"job {job} already has a core in this driver")
        if self.frames:
            if self._size and core.packet_bytes != self._size:
                raise ValueError(f"job {job}: {core.packet_bytes}-byte packets, this driver's "
                                 f"transport rows are cut for {self._size}")
            self._size = core.packet_bytes
            if self._rows is None:
                assert self._batch is not None
                self._rows = len(self._batch.rx_payloads) or None
        self._cores[job] = core
        now = self._clock() if now is None else now
        if self.frames:
            self._send(core, core.start_frames(now))
        else:
            self._emit(core.start(now))

    def poll(self, wait: float = math.inf) -> list[Done]:
        """Wait up to `wait` seconds (less when a core's timer is due sooner) for packets,
        hand them to their cores, fire the timers that are due; the cores that left."""
        out: list[Done] = []
        if not self._cores:
            return out
        now = self._clock()
        due = min((d for c in self._cores.values() if (d := c.next_deadline()) is not None),
                  default=None)
        if due is not None:
            wait = min(wait, max(0.0, due - now))
        elif math.isinf(wait):
            wait = 0.0
        drained = self._poll_frames(wait, out) if self.frames else self._poll_steps(wait, out)
        if drained:
            now = self._clock()
            for core in list(self._cores.values()):
                d = core.next_deadline()
                if d is not None and now >= d:
                    self._call(core, out, self._tick, now)
        at = self._clock()
        for job, core in list(self._cores.items()):
            if core.state is not CoreState.RUNNING:
                del self._cores[job]
                out.append(Done(core, None, at))
        return out

    def run(self, core: WorkerCore) -> None:
        """Drive `core` alone until it is done; its error raised as it is."""
        self.start(core)
        while core.state is CoreState.RUNNING:
            for done in self.poll():
                if done.error is not None:
                    raise done.error

    # -- the two ways ----------------------------------------------------------------------

    def _cio(self) -> CIo | None:
        """The transport's C I/O loops, when this driver's cores are compiled ones."""
        if not self._native:
            return None
        cio: CIo | None = getattr(self._transport, "cio", None)
        return cio

    def _poll_frames(self, wait: float, out: list[Done]) -> bool:
        transport = self._batch
        assert transport is not None
        cio = self._cio()
        n = -1
        if cio is not None and len(self._cores) == 1:
            (core,) = self._cores.values()
            payloads = transport.rx_payloads
            if isinstance(core, NativeCore) and payloads and len(payloads[0]) == self._size:
                n = self._poll_cio(core, wait, out)
        elif cio is not None and self._route and self._many:
            payloads = transport.rx_payloads
            cores = list(self._cores.values())
            if payloads and len(payloads[0]) == self._size and len(cores) <= 32 and \
                    all(isinstance(c, NativeCore) for c in cores):
                n = self._poll_cio_many(cast(list[NativeCore], cores), wait, out)
        if n < 0:
            n = transport.receive_into(wait, self._size)
            n = self._hand_over(n, out)
        other = transport.rx_other
        if other:
            held = list(other)
            other.clear()
            for payload in held:
                target = self._target(payload)
                if target is not None:
                    self._call(target, out, self._step_in, payload)
        return n != self._rows

    def _poll_cio(self, core: NativeCore, wait: float, out: list[Done]) -> int:
        """One wake-up in C (receive, take, send: CIo.cycle); rows it leaves unrouted go the
        Python way.  The rows received."""
        core._check("receive")
        assert self._batch is not None
        self._rows = len(self._batch.rx_payloads)     # a full batch: timers wait (see poll)
        job = core._job_id if self._route else -1
        try:
            status, n = self._transport.receive_cycle(  # type: ignore[attr-defined]
                core, wait, self._clock, job)
        except WorkerError as exc:
            if self._cores.get(core._job_id) is core:
                del self._cores[core._job_id]
                out.append(Done(core, exc, self._clock()))
            return self._rows or 0
        if status == ROUTE:
            self._hand_over(n, out)
        return n

    def _poll_cio_many(self, cores: list[NativeCore], wait: float, out: list[Done]) -> int:
        """One wake-up of several compiled cores in C (CIo.cycle_many): routed by job id
        and taken as `_route_frames` does, sent in one go; a core that stopped at a payload is
        finished here the way `NativeCore.receive_frames` does it, and the cores from it on
        send from here, in the order of the Python loop.  The rows received."""
        assert self._batch is not None
        transport = self._batch
        self._rows = len(transport.rx_payloads)     # a full batch: timers wait (see poll)
        got: CycleMany = self._transport.receive_cycle_many(  # type: ignore[attr-defined]
            cores, self._quiet_t, wait, self._clock)
        n = got.rows
        if got.status == ROUTE:
            self._hand_over(n, out)
            return n
        if not n:
            return n
        self.foreign += got.foreign
        payloads = transport.rx_payloads
        cio = self._cio()
        assert cio is not None
        for i in got.order:
            core = cores[i]
            _taken, nout, sent, code, at = got.per_core[i]
            if code == _OK:
                self._call(core, out, _after_ok, nout, sent, transport.send_frames)
            else:
                self._call(core, out, _finish_stopped, payloads, n, at, code, got.now, cio,
                           transport.send_frames)
        return n

    def _hand_over(self, n: int, out: list[Done]) -> int:
        """Rows 0..n-1 of the transport to their cores (the Python loop's way)."""
        transport = self._batch
        assert transport is not None
        if n:
            # rx_payloads: read after receive_into, which sizes its rows on the first call
            payloads = transport.rx_payloads
            self._rows = len(payloads)
            if not self._route:
                (core,) = self._cores.values()
                self._call(core, out, self._frames_in, payloads, n)
            else:
                self._route_frames(payloads, n, out)
        return n

    def _route_frames(self, payloads: list[memoryview], n: int, out: list[Done]) -> None:
        cores, read = self._cores, _READ_JOB      # whole packets: long enough to read
        if len(cores) == 1:
            (job, core), = cores.items()
            if all(read(payloads[j])[0] == job for j in range(n)):
                self._call(core, out, self._frames_in, payloads, n)
                return
        groups: dict[int, list[memoryview]] = {}
        for j in range(n):
            p = payloads[j]
            job = read(p)[0]
            if job in cores:
                groups.setdefault(job, []).append(p)
            elif job not in self._quiet:
                self.foreign += 1
        for job, views in groups.items():
            target = cores.get(job)     # None: it failed on an earlier group of this batch
            if target is not None:
                self._call(target, out, self._frames_in, views, len(views))

    def _poll_steps(self, wait: float, out: list[Done]) -> bool:
        for payload in self._transport.receive(wait):
            core = self._target(payload)
            if core is not None:
                self._call(core, out, self._step_in, payload)
        return True

    def _target(self, payload: bytes) -> WorkerCore | None:
        if not self._route:
            return next(iter(self._cores.values()), None)
        job = job_id_of(payload)
        core = self._cores.get(job)
        if core is None and job not in self._quiet:
            self.foreign += 1
        return core

    # -- one core's turn -------------------------------------------------------------------

    def _call(self, core: WorkerCore, out: list[Done], fn: Callable[..., None],
              *args: object) -> None:
        """fn(core, *args); a WorkerError takes the core out of the driver, failed."""
        try:
            fn(core, *args)
        except WorkerError as exc:
            job = core._job_id
            if self._cores.get(job) is core:
                del self._cores[job]
                out.append(Done(core, exc, self._clock()))

    def _frames_in(self, core: WorkerCore, views: Sequence[memoryview], n: int) -> None:
        self._send(core, core.receive_frames(views, n, self._clock()))

    def _send(self, core: WorkerCore, sent: list[int]) -> None:
        """The frames a core queued: a compiled core's from C where the transport can."""
        if not sent:
            return
        transport = self._batch
        assert transport is not None
        cio = self._cio()
        if cio is not None and isinstance(core, NativeCore):
            cio.send_core(core, len(sent), transport.send_frames)
        else:
            transport.send_frames(core.frames, sent)

    def _step_in(self, core: WorkerCore, payload: bytes) -> None:
        self._emit(core.receive(payload, self._clock()))

    def _tick(self, core: WorkerCore, now: float) -> None:
        if self.frames:
            self._send(core, core.tick_frames(now))
        else:
            self._emit(core.tick(now))

    def _emit(self, step: Step) -> None:
        if step.send:
            self._transport.send(step.send)
        if self._on_event is not None:
            for ev in step.events:
                self._on_event(ev)


def _after_ok(core: NativeCore, nout: int, sent: int,
              rest: Callable[[Sequence[memoryview], Sequence[int]], None]) -> None:
    """A core whose payloads C took whole: its state, then what the kernel did not take."""
    core._after(_OK)
    if sent < nout:
        rest(core.frames, range(sent, nout))


def _finish_stopped(core: NativeCore, payloads: Sequence[memoryview], n: int, at: int,
                    code: int, now: float, cio: CIo,
                    rest: Callable[[Sequence[memoryview], Sequence[int]], None]) -> None:
    """A core C stopped at payload `at` (code SLOW: the Python core's to handle; else an
    error, raised here): the rest of its payloads of the batch, then all its frames out."""
    core._after(code)                     # raises the error of an error code
    job = core._job_id
    mine = [p for p in payloads[at:n] if _READ_JOB(p)[0] == job]
    core._slow(mine[0], now)
    nout = core._receive_rest(mine, 1, len(mine), now)
    cio.send_core(core, nout, rest)
