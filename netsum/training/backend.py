"""`torch.distributed` backend "netsum": all_reduce through the switch, gloo for the rest.

    import netsum.training.backend               # registers the backend
    dist.init_process_group(backend="netsum")    # torchrun's env + NETSUM_TOPOLOGY

`all_reduce` of one float32 CPU tensor with SUM or AVG goes through the switch (several calls
in flight at once over the job's lanes, in the order the ranks issue them, which c10d requires
to be the same on every rank); every other collective, dtype or op -- broadcast, barrier,
all_gather, MAX, int64, ... -- is handed to a gloo process group built on the same store.  So
code that calls `dist.all_reduce` directly, and DDP without a hook (its bucket all-reduces
call this group's allreduce), use the switch unchanged.

The group is a Python subclass of `torch.distributed.ProcessGroup` (torch 2.13 returns such an
object from the creator as the group itself); its `Work` objects wrap a `torch.futures.Future`
completed by a lane thread.  A worker error fails the work's future with the lane's message.
"""
from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Work

from netsum.training.hook import torch_future
from netsum.training.lanes import LaneEngine, LaneResult
from netsum.training.register import (RegistrationError, StoreRendezvous, TrainingJob, env_int,
                                      open_transport, register, unregister)
from netsum.workers import Timing

__all__ = ["ProcessGroupNetsum", "BACKEND", "FutureWork", "create"]

BACKEND = "netsum"


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


class ProcessGroupNetsum(dist.ProcessGroup):
    """See the module docstring.  `switched` / `delegated` count the all-reduces each way."""

    def __init__(self, store: dist.Store, rank: int, size: int,
                 timeout: datetime.timedelta) -> None:
        super().__init__(rank, size)  # type: ignore[call-arg]  # the stub lists a store too
        # Any: torch's stubs declare only some of the collectives gloo's Backend has.
        self._gloo: Any = dist.ProcessGroupGloo(dist.PrefixStore("netsum-gloo", store), rank, size,
                                           timeout)
        env = os.environ
        topo = env.get("NETSUM_TOPOLOGY")
        if not topo:
            raise RegistrationError("backend netsum: set NETSUM_TOPOLOGY to the topology file")
        self.job: TrainingJob = register(
            StoreRendezvous(store, rank, size), rank, size, topo, env,
            lanes=env_int(env, "NETSUM_LANES", 4), slots=env_int(env, "NETSUM_SLOTS", 256))
        deadline = float(env.get("NETSUM_TIMEOUT") or 10.0)
        self.engine = LaneEngine(open_transport(self.job, env), self.job.lanes(),
                                 Timing(progress_deadline=deadline))
        self.switched = 0
        self.delegated = 0
        self._closed = False

    def getBackendName(self) -> str:  # noqa: N802 - torch's name
        return BACKEND

    # -- the switch's part ----------------------------------------------------------------
    def allreduce(self, tensors: Sequence[torch.Tensor],  # type: ignore[override]
                  opts: object = None) -> Work:
        op = getattr(opts, "reduceOp", dist.ReduceOp.SUM)
        avg = op == dist.ReduceOp.AVG
        if len(tensors) != 1 or not (op == dist.ReduceOp.SUM or avg) or \
                tensors[0].dtype != torch.float32 or tensors[0].device.type != "cpu" or \
                self._closed:
            self.delegated += 1
            return self._gloo_call("allreduce", list(tensors), opts)
        self.switched += 1
        t = tensors[0]
        cf = self.engine.submit(t.detach().contiguous().numpy().copy().reshape(-1),
                                f"all_reduce #{self.switched} ({t.numel()} floats)")
        scale = np.float32(1.0 / self.size()) if avg else None

        def place(res: LaneResult) -> list[torch.Tensor]:
            out = res.tensor if scale is None else res.tensor * scale
            with torch.no_grad():
                t.copy_(torch.from_numpy(out).reshape(t.shape))
            return [t]

        fut = torch_future(cf, place)
        return FutureWork(fut)

    # -- gloo's part: the same call on the gloo group (None options: gloo's defaults) ------
    def _gloo_call(self, name: str, *args: Any) -> Work:
        *head, opts = args
        fn = getattr(self._gloo, name)
        out: Work = fn(*head) if opts is None else fn(*head, opts)
        return out

    def broadcast(self, tensors: Any, opts: Any = None) -> Work:  # type: ignore[override]
        return self._gloo_call("broadcast", tensors, opts)

    def barrier(self, opts: Any = None) -> Work:
        return self._gloo_call("barrier", opts)

    def allgather(self, outs: Any, ins: Any, opts: Any = None) -> Work:
        return self._gloo_call("allgather", outs, ins, opts)

    def _allgather_base(self, out: Any, inp: Any, opts: Any = None) -> Work:
        return self._gloo_call("_allgather_base", out, inp, opts)

    def allgather_coalesced(self, outs: Any, ins: Any, opts: Any = None) -> Work:
        return self._gloo_call("allgather_coalesced", outs, ins, opts)

    def allreduce_coalesced(self, tensors: Any, opts: Any = None) -> Work:
        return self._gloo_call("allreduce_coalesced", tensors, opts)

    def reduce(self, tensors: Any, opts: Any = None) -> Work:  # type: ignore[override]
        return self._gloo_call("reduce", tensors, opts)

    def gather(self, outs: Any, ins: Any, opts: Any = None) -> Work:  # type: ignore[override]
        return self._gloo_call("gather", outs, ins, opts)

    def scatter(self, outs: Any, ins: Any, opts: Any = None) -> Work:  # type: ignore[override]
        return self._gloo_call("scatter", outs, ins, opts)

    def reduce_scatter(self, outs: Any, ins: Any, opts: Any = None) -> Work:  # type: ignore[override]
        return self._gloo_call("reduce_scatter", outs, ins, opts)

    def _reduce_scatter_base(self, out: Any, inp: Any, opts: Any = None) -> Work:
        return self._gloo_call("_reduce_scatter_base", out, inp, opts)

    def alltoall_base(self, out: Any, inp: Any, out_splits: Any, in_splits: Any, opts: Any = None) -> Work:
        return self._gloo_call("alltoall_base", out, inp, out_splits, in_splits, opts)

    def send(self, tensors: Any, dst: Any, tag: Any) -> Work:
        out: Work = getattr(self._gloo, "send")(tensors, dst, tag)
        return out

    def recv(self, tensors: Any, src: Any, tag: Any) -> Work:
        out: Work = getattr(self._gloo, "recv")(tensors, src, tag)
        return out

    def recv_anysource(self, tensors: Any, tag: Any) -> Work:
        out: Work = getattr(self._gloo, "recv_anysource")(tensors, tag)
        return out

    # -- life cycle -------------------------------------------------------------------------
    def close(self, unregister_job: bool = True) -> None:
        """Stop the lanes; rank 0 deletes the job from the switch.  Call after a barrier (every
        rank done with the switch); destroy_process_group() calls it too (`shutdown`)."""
        if self._closed:
            return
        self._closed = True
        self.engine.close()
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
    dist.Backend.register_backend(BACKEND, create, devices=["cpu"])
