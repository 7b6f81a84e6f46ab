"""`torch.distributed` backend "netsum": every collective c10d dispatches, sums through the
switch.

    import netsum.training.backend               # registers the backend
    dist.init_process_group(backend="netsum")    # torchrun's env + NETSUM_TOPOLOGY

The group implements each collective under the names torch 2.13 calls (its Python API calls
the group's methods directly; DDP's C++ reducer calls `allreduce` through the binding):

| collective | route |
|---|---|
| `allreduce` SUM, AVG, PREMUL_SUM of float16/bfloat16/float32/float64 | switch |
| `allreduce_coalesced` (same ops and dtypes; one flat call) | switch |
| `reduce_scatter`, `reduce_scatter_single` (`_reduce_scatter_base`), and their coalesced forms | switch (reduce-scatter): each block's sum goes to the rank that owns it only |
| `allreduce` MAX/MIN/PRODUCT/bitwise, integer or bool dtypes | gloo |
| `broadcast`, `allgather`, `all_gather_single` (`_allgather_base`) and coalesced forms, `alltoall`, `all_to_all_single` (`alltoall_base`), `reduce`, `gather`, `scatter`, `barrier`, `send`/`recv` | gloo |

Why gloo for the gathers and broadcast: the switch sums one contribution per member; an
all-gather as a sum of zero-padded contributions would send n times the tensor up each link
(more traffic than gloo's ring), and a one-to-many copy needs a multicast without a sum, which
netsum.p4 does not have.  Reduce-scatter is in the network: the inputs are laid out rank-major
(rank r's shard of every input, back to back, is one contiguous range), the switch sends each
block's sums only to its owner (protocol v2's dest field) and a header-only ACK to the others,
so each downlink carries S/n of values.  An engine that cannot scatter (the v1 wire's Inf/NaN
carrier) falls back to an all-reduce of the whole input, counted "switch (all-reduce)".

Nothing goes to gloo silently: `self.ledger` (netsum.training.ledger) counts every call and
its bytes per route, logs the first delegation of each kind once, and `close()` logs the
run's summary.  Empty tensors are a no-op (as gloo).  CUDA tensors are staged through pinned
host memory (netsum.training.staging).  The group's timeout is the workers' no-progress
deadline (NETSUM_TIMEOUT, in seconds, overrides it): a rank late by less than the timeout
never fails the job.

The group is a Python subclass of `torch.distributed.ProcessGroup` (torch 2.13 uses such an
object from the creator as the group itself); it registers its gloo group as its CPU backend,
which gives it a group name (FSDP2's DeviceMesh asks for one) and is what the delegated calls
use.  Its `Work` objects wrap a `torch.futures.Future` completed by a lane thread; a worker
error fails the future with the lane's message.
"""
from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Work

from netsum.training.hook import timeout_seconds, torch_future
from netsum.training.lanes import LaneEngine, LaneResult
from netsum.training.ledger import (GLOO, LOCAL, SWITCH, SWITCH_ALLREDUCE, SWITCH_SCATTER,
                                    SWITCHED, CommLedger)
from netsum.training.register import (RegistrationError, StoreRendezvous, TrainingJob, env_int,
                                      join, unregister)
from netsum.training.staging import FLOAT_DTYPES, Stage, stage_for
from netsum.workers import Timing

__all__ = ["ProcessGroupNetsum", "BACKEND", "FutureWork", "create", "reduce_op_name"]

BACKEND = "netsum"
_SWITCHED_OPS = ("SUM", "AVG", "PREMUL_SUM")
_OP_NAMES = ("SUM", "AVG", "PREMUL_SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")


def reduce_op_name(op: Any) -> str:
    for name in _OP_NAMES:
        if op == getattr(dist.ReduceOp, name):
            return name
    return str(op)


class FutureWork(Work):
    """A Work whose completion is a torch Future (set by a lane thread)."""

    def __init__(self, fut: torch.futures.Future[list[torch.Tensor]]) -> None:
        super().__init__()
        self._fut = fut

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        self._fut.wait()     # raises the lane's error
        return True

    def is_completed(self) -> bool:
        return self._fut.done()

    def is_success(self) -> bool:
        if not self._fut.done():
            return False
        try:
            self._fut.value()
        except Exception:  # noqa: BLE001 - the question is only whether it failed
            return False
        return True

    def get_future(self) -> torch.futures.Future[list[torch.Tensor]]:
        return self._fut

    @classmethod
    def done(cls, value: list[torch.Tensor]) -> "FutureWork":
        fut: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()
        fut.set_result(value)
        return cls(fut)


def _nbytes(tensors: Any) -> int:
    """Bytes of every tensor in a (nested) list of tensors."""
    if isinstance(tensors, torch.Tensor):
        return tensors.numel() * tensors.element_size()
    if isinstance(tensors, (list, tuple)):
        return sum(_nbytes(t) for t in tensors)
    return 0


class ProcessGroupNetsum(dist.ProcessGroup):
    """See the module docstring.  `ledger` counts the calls per route."""

    def __init__(self, store: dist.Store, rank: int, size: int,
                 timeout: datetime.timedelta) -> None:
        super().__init__(rank, size)  # type: ignore[call-arg]  # the stub lists a store too
        # Any: torch's stubs declare only some of the collectives gloo's Backend has.
        self._gloo: Any = dist.ProcessGroupGloo(dist.PrefixStore("netsum-gloo", store), rank,
                                                size, timeout)
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.CUSTOM,
                               self._gloo)
        env = os.environ
        topo = env.get("NETSUM_TOPOLOGY")
        if not topo:
            raise RegistrationError("backend netsum: set NETSUM_TOPOLOGY to the topology file")
        self.deadline = timeout_seconds(timeout, env)
        self.job: TrainingJob
        self.job, transport = join(
            StoreRendezvous(store, rank, size), rank, size, topo, env,
            lanes=env_int(env, "NETSUM_LANES", 4), slots=env_int(env, "NETSUM_SLOTS", 256))
        self.engine = LaneEngine(transport, self.job.lanes(),
                                 Timing(progress_deadline=self.deadline), rank=rank,
                                 speculate=env.get("NETSUM_SPECULATE", "1") != "0")
        self.ledger = CommLedger(rank)
        self._calls = 0
        self._closed = False

    def getBackendName(self) -> str:  # noqa: N802 - torch's name
        return BACKEND

    @property
    def switched(self) -> int:
        """Calls summed by the switch (either switched route)."""
        tot = self.ledger.totals()
        return sum(tot[r].calls for r in SWITCHED)

    @property
    def delegated(self) -> int:
        return self.ledger.totals()[GLOO].calls

    # -- the switch's part ----------------------------------------------------------------
    def _why_not(self, tensors: Sequence[torch.Tensor], op: Any) -> str | None:
        """Why these tensors with this op cannot go through the switch (None: they can).  A
        function of what every rank has in common (op, dtype, device), never of the values,
        so every rank takes the same route."""
        name = reduce_op_name(op)
        if name not in _SWITCHED_OPS:
            return f"op {name}: the switch only adds"
        for t in tensors:
            if t.dtype not in FLOAT_DTYPES:
                return f"dtype {t.dtype}: the switch sums floating point"
            if t.device.type not in ("cpu", "cuda"):
                return f"device {t.device.type}"
        return None

    def _scale(self, op: Any) -> float | None:
        """What the sum is multiplied by (AVG: 1/n) or the inputs are (PREMUL_SUM: factor)."""
        name = reduce_op_name(op)
        if name == "AVG":
            return 1.0 / self.size()
        if name == "PREMUL_SUM":
            f = getattr(op, "factor", None)
            return float(f.item() if isinstance(f, torch.Tensor) else f)  # type: ignore[arg-type]
        return None

    def _switch(self, collective: str, route: str, inputs: Sequence[torch.Tensor],
                place: Callable[[np.ndarray, Sequence[Stage]], None],
                outputs: list[torch.Tensor], shards: Sequence[int] | None = None,
                arrange: Callable[[list[np.ndarray]], np.ndarray] | None = None) -> Work:
        """Sum the inputs, flattened into one tensor (by `arrange`, default back to back),
        through the switch; `place` puts the float32 sum (with `shards`: this rank's shard of
        it, reduce-scattered in the network) where the collective's outputs are."""
        if self._closed:
            raise RuntimeError(f"netsum: {collective} on a closed process group")
        total = sum(t.numel() for t in inputs)
        nbytes = _nbytes(list(inputs))
        if total == 0:
            self.ledger.add(collective, LOCAL, 0)
            return FutureWork.done(outputs)
        stages = [stage_for(t) for t in inputs]
        host = [s.read(t) for s, t in zip(stages, inputs)]
        if arrange is not None:
            flat = arrange(host)
        else:
            flat = host[0] if len(host) == 1 else np.concatenate(host)
        self._calls += 1
        cf = self.engine.submit(flat, f"{collective} #{self._calls} ({total} values)", shards)
        self.ledger.switched(collective, nbytes, route)
        devices = sorted({d for s in stages for d in s.devices}, key=str)

        def done(res: LaneResult) -> list[torch.Tensor]:
            place(res.tensor, stages)
            return outputs

        return FutureWork(torch_future(cf, done, devices))

    def _allreduce_flat(self, collective: str, tensors: Sequence[torch.Tensor],
                        op: Any) -> Work:
        scale = self._scale(op)
        premul = reduce_op_name(op) == "PREMUL_SUM"
        inputs = [t * scale if premul and scale is not None else t for t in tensors]

        def place(total: np.ndarray, stages: Sequence[Stage]) -> None:
            out = total if premul or scale is None else total / np.float32(self.size())
            at = 0
            for s, t in zip(stages, tensors):
                s.write(t, out[at:at + t.numel()])
                at += t.numel()

        return self._switch(collective, SWITCH, inputs, place, list(tensors))

    def allreduce(self, tensors: Sequence[torch.Tensor],  # type: ignore[override]
                  opts: Any = None) -> Work:
        op = getattr(opts, "reduceOp", dist.ReduceOp.SUM)
        why = self._why_not(tensors, op)
        if why is None and len(tensors) != 1:
            why = f"{len(tensors)} tensors in one call (one device per process)"
        if why is not None:
            return self._delegate("allreduce", why, "allreduce", list(tensors), opts)
        return self._allreduce_flat("allreduce", tensors, op)

    def allreduce_coalesced(self, tensors: Any, opts: Any = None) -> Work:
        op = getattr(opts, "reduceOp", dist.ReduceOp.SUM)
        why = self._why_not(tensors, op)
        if why is not None:
            return self._delegate("allreduce_coalesced", why, "allreduce_coalesced", tensors,
                                  opts)
        return self._allreduce_flat("allreduce_coalesced", tensors, op)

    def _scatter_sum(self, collective: str, outs: Sequence[torch.Tensor],
                        ins: Sequence[torch.Tensor], op: Any) -> Work:
        """Reduce-scatter through the switch: input j holds the n shards of output j back to
        back.  In the network when the engine can scatter: rank q's shards of every input,
        back to back, make rank q's contiguous shard of one flat tensor, and the switch
        sends each block's sums to its owner alone.  Otherwise one all-reduce of the whole
        input, each rank keeping its shards (counted "switch (all-reduce)")."""
        n, r = self.size(), self.rank()
        for o, i in zip(outs, ins):
            if i.numel() != n * o.numel():
                raise ValueError(f"netsum: {collective}: input has {i.numel()} elements, "
                                 f"output {o.numel()}; the input must be {n} x the output")
        scale = self._scale(op)
        premul = reduce_op_name(op) == "PREMUL_SUM"
        inputs = [i * scale if premul and scale is not None else i for i in ins]
        sizes = [o.numel() for o in outs]

        def write(part: np.ndarray, j: int, stages: Sequence[Stage]) -> None:
            o, i = outs[j], ins[j]
            # The input's stage holds the stream its copy out was queued on.
            (stages[j] if o.device == i.device else stage_for(o)).write(
                o, np.ascontiguousarray(part))

        def scale_sum(total: np.ndarray) -> np.ndarray:
            return total if premul or scale is None else total / np.float32(n)

        if self.engine.can_scatter:
            def arrange(host: list[np.ndarray]) -> np.ndarray:
                return np.concatenate([h.reshape(-1)[q * m:(q + 1) * m]
                                       for q in range(n) for h, m in zip(host, sizes)])

            def place_shard(shard: np.ndarray, stages: Sequence[Stage]) -> None:
                out, at = scale_sum(shard), 0
                for j, m in enumerate(sizes):
                    write(out[at:at + m], j, stages)
                    at += m

            return self._switch(collective, SWITCH_SCATTER, inputs, place_shard, list(outs),
                                shards=[sum(sizes)] * n, arrange=arrange)

        def place(total: np.ndarray, stages: Sequence[Stage]) -> None:
            out, at = scale_sum(total), 0
            for j, (m, i) in enumerate(zip(sizes, ins)):
                write(out[at + r * m:at + (r + 1) * m], j, stages)
                at += i.numel()

        return self._switch(collective, SWITCH_ALLREDUCE, inputs, place, list(outs))

    def reduce_scatter(self, outs: Any, ins: Any, opts: Any = None) -> Work:  # type: ignore[override]
        op = getattr(opts, "reduceOp", dist.ReduceOp.SUM)
        flat_ins = [t for group in ins for t in group]
        why = self._why_not([*outs, *flat_ins], op)
        if why is not None:
            return self._delegate("reduce_scatter", why, "reduce_scatter", outs, ins, opts)
        # Each output's input list (one tensor per rank) as one flat tensor, rank-major.
        joined = [torch.cat([t.reshape(-1) for t in group]) for group in ins]
        return self._scatter_sum("reduce_scatter", outs, joined, op)

    def reduce_scatter_single(self, out: Any, inp: Any, opts: Any = None) -> Work:
        op = getattr(opts, "reduceOp", dist.ReduceOp.SUM)
        why = self._why_not([out, inp], op)
        if why is not None:
            return self._delegate("reduce_scatter_single", why, "_reduce_scatter_base", out,
                                  inp, opts)
        return self._scatter_sum("reduce_scatter_single", [out], [inp], op)

    def _reduce_scatter_base(self, out: Any, inp: Any, opts: Any = None) -> Work:
        return self.reduce_scatter_single(out, inp, opts)

    def reduce_scatter_single_coalesced(self, outs: Any, ins: Any, opts: Any = None) -> Work:
        op = getattr(opts, "reduceOp", dist.ReduceOp.SUM)
        why = self._why_not([*outs, *ins], op)
        if why is not None:
            return self._per_pair("reduce_scatter_single_coalesced", why,
                                  "_reduce_scatter_base", outs, ins, opts)
        return self._scatter_sum("reduce_scatter_single_coalesced", outs, ins,
                                                  op)

    def reduce_scatter_tensor_coalesced(self, outs: Any, ins: Any, opts: Any = None) -> Work:
        return self.reduce_scatter_single_coalesced(outs, ins, opts)

    # -- gloo's part: counted, the first of each kind logged --------------------------------
    def _delegate(self, collective: str, why: str, method: str, *args: Any) -> Work:
        *head, opts = args
        self.ledger.delegated(collective, _nbytes(list(head)), why)
        fn = getattr(self._gloo, method)
        out: Work = fn(*head) if opts is None else fn(*head, opts)
        return out

    def _per_pair(self, collective: str, why: str, method: str, outs: Sequence[torch.Tensor],
                  ins: Sequence[torch.Tensor], opts: Any) -> Work:
        """A coalesced collective gloo has no single call for: one call per pair."""
        self.ledger.delegated(collective, _nbytes([*outs, *ins]), why)
        fn = getattr(self._gloo, method)
        works = [fn(o, i) if opts is None else fn(o, i, opts) for o, i in zip(outs, ins)]
        if not works:
            return FutureWork.done(list(outs))
        every = torch.futures.collect_all([w.get_future() for w in works])
        return FutureWork(every.then(lambda _f: list(outs)))

    _GATHERS = "the switch only sums; a gather through it would send n x the data up"

    def broadcast(self, tensors: Any, opts: Any = None) -> Work:  # type: ignore[override]
        return self._delegate("broadcast", "a copy from one rank, not a sum", "broadcast",
                              tensors, opts)

    def barrier(self, opts: Any = None) -> Work:
        return self._delegate("barrier", "no data", "barrier", opts)

    def allgather(self, outs: Any, ins: Any, opts: Any = None) -> Work:
        return self._delegate("allgather", self._GATHERS, "allgather", outs, ins, opts)

    def all_gather_single(self, out: Any, inp: Any, opts: Any = None) -> Work:
        return self._delegate("all_gather_single", self._GATHERS, "_allgather_base", out, inp,
                              opts)

    def _allgather_base(self, out: Any, inp: Any, opts: Any = None) -> Work:
        return self.all_gather_single(out, inp, opts)

    def allgather_coalesced(self, outs: Any, ins: Any, opts: Any = None) -> Work:
        return self._delegate("allgather_coalesced", self._GATHERS, "allgather_coalesced",
                              outs, ins, opts)

    def all_gather_single_coalesced(self, outs: Any, ins: Any, opts: Any = None) -> Work:
        return self._per_pair("all_gather_single_coalesced", self._GATHERS, "_allgather_base",
                              outs, ins, opts)

    def allgather_into_tensor_coalesced(self, outs: Any, ins: Any, opts: Any = None) -> Work:
        return self.all_gather_single_coalesced(outs, ins, opts)

    def reduce(self, tensors: Any, opts: Any = None) -> Work:  # type: ignore[override]
        return self._delegate("reduce", "a sum for one rank only", "reduce", tensors, opts)

    def gather(self, outs: Any, ins: Any, opts: Any = None) -> Work:  # type: ignore[override]
        return self._delegate("gather", self._GATHERS, "gather", outs, ins, opts)

    def scatter(self, outs: Any, ins: Any, opts: Any = None) -> Work:  # type: ignore[override]
        return self._delegate("scatter", "a copy from one rank, not a sum", "scatter", outs,
                              ins, opts)

    def alltoall(self, outs: Any, ins: Any, opts: Any = None) -> Work:
        return self._delegate("alltoall", "a permutation, not a sum", "alltoall", outs, ins,
                              opts)

    def all_to_all_single(self, out: Any, inp: Any, out_splits: Any, in_splits: Any,
                          opts: Any = None) -> Work:
        return self._delegate("all_to_all_single", "a permutation, not a sum", "alltoall_base",
                              out, inp, out_splits, in_splits, opts)

    def alltoall_base(self, out: Any, inp: Any, out_splits: Any, in_splits: Any,
                      opts: Any = None) -> Work:
        return self.all_to_all_single(out, inp, out_splits, in_splits, opts)

    def send(self, tensors: Any, dst: Any, tag: Any) -> Work:
        self.ledger.delegated("send", _nbytes(tensors), "point to point")
        out: Work = self._gloo.send(tensors, dst, tag)
        return out

    def recv(self, tensors: Any, src: Any, tag: Any) -> Work:
        self.ledger.delegated("recv", _nbytes(tensors), "point to point")
        out: Work = self._gloo.recv(tensors, src, tag)
        return out

    def recv_anysource(self, tensors: Any, tag: Any) -> Work:
        self.ledger.delegated("recv_anysource", _nbytes(tensors), "point to point")
        out: Work = self._gloo.recv_anysource(tensors, tag)
        return out

    # -- life cycle -------------------------------------------------------------------------
    def close(self, unregister_job: bool = True) -> None:
        """Stop the lanes and log the run's summary; rank 0 deletes the job from the switch.
        Call after a barrier (every rank done with the switch); destroy_process_group() calls
        it too (`shutdown`)."""
        if self._closed:
            return
        self._closed = True
        self.engine.close()
        self.ledger.log_summary()
        if unregister_job and self.rank() == 0:
            unregister(self.job)

    def shutdown(self) -> None:
        """dist.destroy_process_group() calls this: the same as close() (barrier first)."""
        self.close()


def create(store: dist.Store, rank: int, size: int,
           timeout: datetime.timedelta) -> ProcessGroupNetsum:
    """The creator function `Backend.register_backend` calls."""
    return ProcessGroupNetsum(store, rank, size, timeout)


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, create, devices=["cpu", "cuda"])
