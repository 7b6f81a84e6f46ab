"""The DDP communication hook: each gradient bucket all-reduced through the switch.

    state = NetsumHookState.from_env()          # after dist.init_process_group("gloo")
    ddp.register_comm_hook(state, netsum_hook)

`netsum_hook` copies the bucket's flat gradient, hands it to the rank's `LaneEngine` and returns
a `torch.futures.Future` at once; a lane thread completes it with the mean (the sum through the
switch divided by the world size, as DDP expects), written into the bucket in its own dtype:
float32, bfloat16, float16 and float64 buckets all go through the switch
(netsum.training.staging), and CUDA buckets are staged through pinned host memory.  Backward
meanwhile goes on computing the next buckets, so bucket i's communication overlaps the
computation of the buckets after it; DDP waits for every future before backward returns, i.e.
before `optimizer.step()`.

Alignment across ranks: DDP launches buckets strictly in index order on every rank, and the
engine deals tensors to lanes in submission order, restarted at bucket 0 of every step (the
first bucket DDP reduces is index 0), so bucket i of a step meets bucket i of the other ranks
in the same lane.  DDP rebuilds its buckets after the first iteration (from the order in which
gradients became ready, rank 0's order broadcast to all): the layout -- (index, numel) of each
bucket -- is compared across the ranks once per new layout (the first step and the first step
after the rebuild) through the gloo group, and a mismatch fails the step with both layouts
instead of summing unrelated gradients.  A worker error fails the future with the lane's
message (DDP raises it from backward); no future waits longer than the workers' deadline,
which is the process group's timeout (NETSUM_TIMEOUT overrides it).
"""
import datetime
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, cast

import numpy as np
import torch
import torch.distributed as dist

from netsum.training.lanes import LaneEngine, LaneResult
from netsum.training.ledger import CommLedger
from netsum.training.register import RegistrationError, TrainingJob, env_int, join, unregister
from netsum.training.staging import FLOAT_DTYPES, stage_for
from netsum.workers import Timing

__all__ = ["NetsumHookState", "netsum_hook", "BucketTrace", "ObjectRendezvous",
           "timed_allreduce_hook", "GlooHookState", "torch_future", "timeout_seconds",
           "group_timeout"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BucketTrace:
    """One bucket's all-reduce: when it was handed over and when its mean was ready."""
    step: int
    index: int
    numel: int
    submitted: float
    finished: float
    nbytes: int = 0           # the bucket's bytes in its dtype


def timeout_seconds(timeout: datetime.timedelta | float | None,
                    env: Mapping[str, str] | None = None) -> float:
    """The workers' no-progress deadline: NETSUM_TIMEOUT (seconds) if set, else the process
    group's timeout."""
    env = os.environ if env is None else env
    text = env.get("NETSUM_TIMEOUT")
    if text:
        try:
            value = float(text)
        except ValueError:
            raise RegistrationError(f"NETSUM_TIMEOUT={text!r} is not a number of seconds") \
                from None
        if not value > 0:
            raise RegistrationError(f"NETSUM_TIMEOUT={text!r} must be > 0")
        return value
    if timeout is None:
        raise RegistrationError("no timeout: pass the process group's or set NETSUM_TIMEOUT")
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) \
        else float(timeout)
    if not seconds > 0:
        raise RegistrationError(f"process group timeout {seconds:g} s must be > 0")
    return seconds


def group_timeout(group: dist.ProcessGroup | None = None) -> datetime.timedelta:
    """The timeout a process group was made with (its CPU backend's options)."""
    pg = group if group is not None else dist.group.WORLD
    assert pg is not None
    backend = pg._get_backend(torch.device("cpu"))
    timeout = getattr(getattr(backend, "options", None), "_timeout", None)
    if not isinstance(timeout, datetime.timedelta):
        raise RegistrationError("cannot read the process group's timeout: set NETSUM_TIMEOUT")
    return timeout


class ObjectRendezvous:
    """Rendezvous over an initialised process group (gloo object collectives)."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)

    def gather(self, value: str) -> list[str] | None:
        out: list[object] = [None] * self.world
        dist.all_gather_object(out, value, group=self.group)
        return [str(v) for v in out] if self.rank == 0 else None

    def broadcast(self, value: str | None) -> str:
        box: list[object] = [value]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return str(box[0])


@dataclass(slots=True)
class _Tracing:
    step: int = 0
    traces: list[BucketTrace] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, index: int, numel: int, submitted: float, finished: float,
               nbytes: int = 0) -> None:
        with self.lock:
            self.traces.append(BucketTrace(self.step, index, numel, submitted, finished,
                                           nbytes))

    def take(self) -> list[BucketTrace]:
        with self.lock:
            out, self.traces = self.traces, []
        return out


class NetsumHookState:
    """The hook's state: the lane engine, the world size, the bucket layout seen so far and
    the per-bucket timing trace (`take_traces()`)."""

    def __init__(self, engine: LaneEngine, job: TrainingJob | None, world_size: int,
                 group: dist.ProcessGroup | None = None, check_layout: bool = True) -> None:
        self.engine = engine
        self.job = job
        self.world_size = world_size
        self.group = group
        self.check_layout = check_layout
        self._layout: list[tuple[int, int]] = []     # (index, numel) of this step so far
        self._known: list[tuple[int, int]] | None = None
        self._tracing = _Tracing()
        self.layout_checks = 0
        self.ledger = CommLedger(dist.get_rank(group) if dist.is_initialized() else 0)
        self.deadline = engine.deadline

    @classmethod
    def from_env(cls, topology: str | Path | None = None, lanes: int | None = None,
                 slots: int | None = None, timeout: float | None = None,
                 group: dist.ProcessGroup | None = None,
                 env: Mapping[str, str] | None = None, delay: float = 0.0) -> "NetsumHookState":
        """Register the job (rank 0 writes the switch) and open this rank's transport.
        Defaults come from NETSUM_TOPOLOGY, NETSUM_LANES (4), NETSUM_SLOTS (256); the deadline
        (a silent peer fails the step after that long) is `timeout`, else NETSUM_TIMEOUT, else
        the process group's timeout."""
        env = os.environ if env is None else env
        topo = topology or env.get("NETSUM_TOPOLOGY")
        if not topo:
            raise RegistrationError("no topology file: pass topology= or set NETSUM_TOPOLOGY")
        deadline = timeout or timeout_seconds(
            None if env.get("NETSUM_TIMEOUT") else group_timeout(group), env)
        job, transport = join(ObjectRendezvous(group), dist.get_rank(group),
                              dist.get_world_size(group), topo, env,
                              lanes=lanes or env_int(env, "NETSUM_LANES", 4),
                              slots=slots or env_int(env, "NETSUM_SLOTS", 256))
        engine = LaneEngine(transport, job.lanes(), Timing(progress_deadline=deadline),
                            delay=delay, speculate=env.get("NETSUM_SPECULATE", "1") != "0")
        return cls(engine, job, job.world_size, group)

    # -- step bookkeeping ------------------------------------------------------------------
    def _begin(self, index: int, numel: int) -> None:
        if index == 0:
            self._end_step()
            self.engine.reset_order()
        self._layout.append((index, numel))

    def _end_step(self) -> None:
        if self._layout:
            self._tracing.step += 1
        self._layout = []

    def _verify(self) -> None:
        """Compare this step's layout with the other ranks' once per new layout."""
        layout = list(self._layout)
        if layout == self._known or not self.check_layout:
            return
        others: list[object] = [None] * self.world_size
        dist.all_gather_object(others, layout, group=self.group)
        self.layout_checks += 1
        if any(o != layout for o in others):
            raise RuntimeError(
                "netsum: DDP's buckets differ between ranks, so bucket i of one rank would be "
                f"summed with another rank's bucket i: (index, numel) per rank: {others}")
        self._known = layout

    def take_traces(self) -> list[BucketTrace]:
        return self._tracing.take()

    def close(self, unregister_job: bool = True) -> None:
        """Stop the engine; rank 0 deletes the job's entries (call after a barrier)."""
        self.engine.close()
        self.ledger.log_summary()
        if unregister_job and self.job is not None and self.job.rank == 0:
            unregister(self.job)


def netsum_hook(state: NetsumHookState,
                bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: the mean of the bucket over the ranks, through the switch."""
    buf = bucket.buffer()
    index = bucket.index()
    if buf.dtype not in FLOAT_DTYPES:
        raise TypeError(f"netsum_hook: bucket {index} is {buf.dtype}; the switch sums "
                        f"{', '.join(str(d) for d in FLOAT_DTYPES)}")
    state._begin(index, buf.numel())
    if bucket.is_last():
        state._verify()
    submitted = time.monotonic()
    stage = stage_for(buf)
    nbytes = buf.numel() * buf.element_size()
    # A copy (staging reads one): the bucket's storage is DDP's until the future completes.
    cf = state.engine.submit(stage.read(buf), f"bucket {index} ({buf.numel()} {buf.dtype}, "
                             f"step {state._tracing.step})", key=index)
    state.ledger.switched("ddp bucket", nbytes)
    world = state.world_size
    tracing = state._tracing

    def mean(res: LaneResult) -> torch.Tensor:
        stage.write(buf, res.tensor / np.float32(world))
        tracing.record(index, buf.numel(), submitted, time.monotonic(), nbytes)
        return buf

    return torch_future(cf, mean, stage.devices)


def torch_future(cf: Future[LaneResult], convert: Callable[[LaneResult], T],
                 devices: Sequence[torch.device] = ()) -> torch.futures.Future[T]:
    """A torch Future completed with `convert(result)` when `cf` completes, or failed with
    its error.  The error is raised inside a `then` callback so that the future holds a real
    error: `torch.futures.Future.set_exception` only stores the exception as the *value*
    (unwrapped by Python's wait()), and DDP's C++ reducer, reading the value as a tensor,
    would report "Unable to cast ... to Tensor" around the message."""
    # With CUDA devices the future records their current streams' events when completed, so
    # a waiter's stream waits for the staged copy back.
    outcome: torch.futures.Future[list[object]] = (
        torch.futures.Future(devices=list(devices)) if devices else torch.futures.Future())

    def done(c: Future[LaneResult]) -> None:
        try:
            outcome.set_result([convert(c.result())])
        except BaseException as exc:  # noqa: BLE001 - handed over through the future
            outcome.set_result([exc])

    def unwrap(f: torch.futures.Future[list[object]]) -> T:
        (got,) = f.value()
        if isinstance(got, BaseException):
            raise got
        return cast(T, got)

    chained = outcome.then(unwrap)
    cf.add_done_callback(done)
    return chained


# -- the gloo baseline, timed the same way --------------------------------------------------
class GlooHookState:
    """State of `timed_allreduce_hook`: DDP's own all-reduce (gloo), with the same trace."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.group = group
        self.world_size = dist.get_world_size(group)
        self._tracing = _Tracing()
        self._seen = False

    def take_traces(self) -> list[BucketTrace]:
        return self._tracing.take()

    def close(self, unregister_job: bool = True) -> None:
        pass


def timed_allreduce_hook(state: GlooHookState,
                         bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """What DDP does without a hook (all_reduce SUM, then divide), recording the bucket's
    times: the baseline of the comparison."""
    buf = bucket.buffer()
    index = bucket.index()
    if index == 0 and state._seen:
        state._tracing.step += 1
    state._seen = True
    submitted = time.monotonic()
    tracing = state._tracing
    numel = buf.numel()
    work = dist.all_reduce(buf.div_(state.world_size), group=state.group, async_op=True)
    assert work is not None

    def done(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
        tracing.record(index, numel, submitted, time.monotonic())
        return f.value()[0]

    return work.get_future().then(done)
