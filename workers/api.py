"""The public allreduce and reduce_scatter: one `WorkerCore` driven over a `Transport` with
the real clock by the one driver (workers/driver.py: frames in place and the compiled core where
the transport allows, else the Step API).

`allreduce` (and `reduce_scatter`) is one call on one tensor.  `Worker` keeps what must survive between calls of the
same job registration: the round each slot takes next (the switch keeps every slot's round
across calls and refuses older ones), and refuses to go on after a failed call, when the
switch's state is unknown.  A new registration of the job (the controller gives it a new
epoch) needs a new `Worker`: its rounds start at 0 again.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from netsum.workers import quant
from netsum.workers.blocks import even_shards
from netsum.workers.core import AllreduceResult, Event, JobConfig, Timing
from netsum.workers.driver import Driver
from netsum.workers.errors import ProtocolStateError, QuantError, SumOverflowError, WorkerError
from netsum.workers.transport import Transport

__all__ = ["allreduce", "reduce_scatter", "Worker"]


def allreduce(tensor: object, transport: Transport, job: JobConfig, *,
              timing: Timing = Timing(), rounds: Sequence[int] | None = None,
              clock: Callable[[], float] = time.monotonic,
              on_event: Callable[[Event], None] | None = None, rank: int | None = None,
              nonfinite: npt.ArrayLike | None = None,
              out: np.ndarray | None = None, predict: npt.ArrayLike | None = None,
              slack: int = 0) -> AllreduceResult:
    """Sum `tensor` with the other workers of `job`; returns the float32 sum (the input's
    shape), statistics and `next_rounds` to pass to the next call of the same job
    registration (`rounds`: where this call starts; default every slot at round 0).

    Every worker of the job must call with a tensor of the same length (the switch refuses a
    contribution of another length: the call fails with RejectedError naming both lengths).

    Inf/NaN (protocol v2, docs/protocol.md "NONFINITE"): the tensor must be finite; a caller
    whose gradient holds Inf/NaN passes it with those elements zeroed and, in `nonfinite`,
    one boolean per block (`plan_blocks(len(tensor), job.k).any_per_block(~isfinite(x))`),
    and gets `result.flags`: per block, Flags.NONFINITE where any rank flagged that block
    (the switch ORs the flags).  Every rank gets the same flags; what to do in those blocks
    (a second round that sums the Inf/NaN pattern, as gloo would produce it) is the caller's.

    `out`: a writable C-contiguous float32 array of the tensor's size that receives the sum
    in place and is returned as `result.tensor` (as torch's all_reduce fills its tensor): no
    new array per call.  It may be the input tensor itself (in-place all-reduce: each
    block's input is read when it is first sent, before its result can come); an `out` that
    overlaps the input any other way gets a copy of the input first.  After an error its
    contents are undefined.

    `predict` (speculative exponents, docs/quantization.md): per block of K elements, the
    biased exponent to quantize it with on its first use -- typically the previous call's
    `result.maxima` for the same tensor (a training bucket); a block whose max proposal turns
    out above the prediction, or more than `slack` below it, is sent once more with the
    agreed exponent (`result.stats.misses`).  No bootstrap round: a call whose predictions
    all hit takes one round trip.  Every rank must pass the same predictions and slack (the
    switch refuses a contribution quantized with another exponent: RejectedError).

    `rank`: this worker's position in the job, for the errors (optional).  Raises QuantError
    for a bad tensor (before sending anything), RejectedError at once when the switch
    refuses this worker's DATA (its member count, K, length, slots or schedule disagree with
    the job's or the other members'), WorkerTimeoutError when no result arrives for
    `timing.progress_deadline` seconds (naming the members the switch says are missing, and
    the job's last refusal), TransportError for socket failures."""
    return _call(tensor, transport, job, timing, rounds, clock, on_event, rank, None,
                 nonfinite, out, predict, slack)


def reduce_scatter(tensor: object, transport: Transport, job: JobConfig, *, rank: int,
                   shards: Sequence[int] | None = None, timing: Timing = Timing(),
                   rounds: Sequence[int] | None = None,
                   clock: Callable[[], float] = time.monotonic,
                   on_event: Callable[[Event], None] | None = None,
                   nonfinite: npt.ArrayLike | None = None,
                   predict: npt.ArrayLike | None = None, slack: int = 0) -> AllreduceResult:
    """In-network reduce-scatter: the sum of `tensor` over the job's workers, of which this
    worker (`rank`) gets its own shard alone (`result.tensor`, 1-D float32): rank r owns the
    next `shards[r]` elements (default: torch's reduce_scatter_tensor layout, equal parts,
    the first `len % n` one longer).  Each shard is cut into blocks of its own; the switch
    sends each block's values to its owner only and an ACK to the others, so a rank's
    downlink carries its shard's values (plus a header per other block).  `nonfinite` and
    `result.flags` as for `allreduce`, per block of `plan_blocks(len, k, shards)`, and so
    are `predict` and `slack`.  Every worker must call with the same length and shards."""
    if shards is None:
        shards = even_shards(len(_flat(tensor)), job.num_workers)
    return _call(tensor, transport, job, timing, rounds, clock, on_event, rank, shards,
                 nonfinite, None, predict, slack)


def _flat(tensor: object) -> np.ndarray:
    return quant.as_tensor(tensor)


def _apart(tensor: object, out: np.ndarray) -> object:
    """The tensor to read when the sum goes into `out`: itself when `out` is its very memory
    (in place: safe, see allreduce) or does not touch it, else a copy of it (a partial
    overlap: a block's result could land on another block's input before it is sent)."""
    if not isinstance(out, np.ndarray):
        return tensor
    x = _flat(tensor)
    if not np.may_share_memory(x, out):
        return tensor
    same = (x.__array_interface__["data"][0] == out.__array_interface__["data"][0] and
            x.nbytes == out.nbytes and x.dtype == out.dtype)
    return tensor if same else x.copy()


def _call(tensor: object, transport: Transport, job: JobConfig, timing: Timing,
          rounds: Sequence[int] | None, clock: Callable[[], float],
          on_event: Callable[[Event], None] | None, rank: int | None,
          shards: Sequence[int] | None, nonfinite: npt.ArrayLike | None,
          out: np.ndarray | None = None, predict: npt.ArrayLike | None = None,
          slack: int = 0) -> AllreduceResult:
    if not all(callable(getattr(transport, m, None)) for m in ("send", "receive")):
        raise TypeError(f"transport must have send() and receive(), got "
                        f"{type(transport).__name__}")
    if out is not None:
        tensor = _apart(tensor, out)
    driver = Driver(transport, clock, on_event=on_event, route=False)
    core = driver.core(tensor, job, timing, rounds, rank=rank, shards=shards,
                       nonfinite=nonfinite, predict=predict, slack=slack)
    if out is not None:
        core.write_into(out)
    driver.run(core)
    try:
        return core.result()
    except SumOverflowError as exc:
        exc.next_rounds = core.next_rounds()  # every use completed: the switch state is known
        raise


class Worker:
    """One worker process's handle on one job: repeated allreduce (and reduce_scatter) calls
    on one transport.  `rank`: this worker's rank in the job (needed for reduce_scatter).

    `speculate`: a call given no `predict` predicts its blocks' exponents from the maxima of
    this Worker's latest call of the same length and shards (slack 0: a hit quantizes exactly
    as the agreed scheme would, so the sums are the same bit for bit; a block whose max moved
    is sent again).  A call that repeats its predecessor's magnitudes then takes one round
    trip instead of two.  Every worker of the job must make the same choice and the same calls
    in the same order (the switch refuses a contribution quantized with another exponent)."""

    def __init__(self, transport: Transport, job: JobConfig, timing: Timing = Timing(),
                 rank: int | None = None, *, speculate: bool = False) -> None:
        self.transport = transport
        self.job = job
        self.timing = timing
        self.rank = rank
        self.speculate = speculate
        self._rounds: tuple[int, ...] | None = None
        self._broken: str | None = None
        # speculate: per (length, shards), the maxima of the latest such call
        self._maxima: dict[tuple[int, tuple[int, ...] | None], np.ndarray] = {}

    def allreduce(self, tensor: object, nonfinite: npt.ArrayLike | None = None, *,
                  out: np.ndarray | None = None, predict: npt.ArrayLike | None = None,
                  slack: int = 0) -> AllreduceResult:
        """See the module's `allreduce` (`out`, `predict`, `slack`: as there)."""
        return self._call(tensor, None, nonfinite, out, predict, slack)

    def reduce_scatter(self, tensor: object, shards: Sequence[int] | None = None,
                       nonfinite: npt.ArrayLike | None = None, *,
                       predict: npt.ArrayLike | None = None, slack: int = 0
                       ) -> AllreduceResult:
        if self.rank is None:
            raise ValueError("reduce_scatter needs the Worker's rank")
        if shards is None:
            shards = even_shards(len(_flat(tensor)), self.job.num_workers)
        return self._call(tensor, shards, nonfinite, None, predict, slack)

    def _call(self, tensor: object, shards: Sequence[int] | None,
              nonfinite: npt.ArrayLike | None, out: np.ndarray | None = None,
              predict: npt.ArrayLike | None = None, slack: int = 0) -> AllreduceResult:
        if self._broken:
            raise ProtocolStateError(
                f"job {self.job.job_id}: a previous allreduce failed ({self._broken}); the "
                "switch's slot state is unknown - reset the job (a new epoch) and start a new "
                "Worker")
        key = None
        if self.speculate and predict is None:
            # the length without converting the tensor (the core does that, once)
            key = (int(np.asarray(tensor).size),
                   None if shards is None else tuple(int(v) for v in shards))
            predict = self._maxima.get(key)
        try:
            result = _call(tensor, self.transport, self.job, self.timing, self._rounds,
                           time.monotonic, None, self.rank, shards, nonfinite, out, predict,
                           slack)
        except SumOverflowError as exc:
            self._rounds = exc.next_rounds
            raise
        except QuantError:
            raise  # the tensor was rejected before anything was sent: the switch is untouched
        except WorkerError as exc:
            self._broken = type(exc).__name__
            raise
        self._rounds = result.next_rounds
        if key is not None:
            if len(self._maxima) >= 64 and key not in self._maxima:
                self._maxima.pop(next(iter(self._maxima)))     # the oldest length
            self._maxima[key] = result.maxima
        return result

    @property
    def next_rounds(self) -> tuple[int, ...] | None:
        """The round each slot takes next (None before the first call: all 0)."""
        return self._rounds
