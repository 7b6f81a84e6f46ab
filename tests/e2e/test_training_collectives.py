"""Every collective torch 2.13 dispatches, through the netsum backend against the real switch
(netsum-switch daemon on UDP-tunnel ports), compared with gloo running the same script in the
same test.

The inputs are dyadic (multiples of 1/8, small), so every sum is exact in every dtype and
through the quantizer: netsum's answer must equal gloo's bit for bit, for the switched
collectives as for the delegated ones.  One random float32 tensor checks the switched path
against its inputs' float64 sum within the documented bound instead.  The routes (switch,
switch as all-reduce, gloo, local) are what the backend's table in docs/training.md promises.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (the `train` extra)")

from netsum.controller.fabric import Controller  # noqa: E402
from netsum.controller.topology import load_topology  # noqa: E402
from netsum.rig import Rig, RigConfig  # noqa: E402
from netsum.training.compare import TrainOptions, start_ranks, wait_ranks  # noqa: E402
from netsum.wire import K_DEFAULT  # noqa: E402

pytestmark = pytest.mark.slow

SCRIPT = r'''
import json, sys, datetime
import torch, torch.distributed as dist
backend, out = sys.argv[sys.argv.index("--comm") + 1], sys.argv[sys.argv.index("--out") + 1]
if backend == "netsum":
    import netsum.training.backend
dist.init_process_group(backend, timeout=datetime.timedelta(seconds=60))
r, n = dist.get_rank(), dist.get_world_size()
res = {}
def rec(name, t):
    ts = t if isinstance(t, list) else [t]
    res[name] = [x.double().tolist() for x in ts]
def base(m, dtype=torch.float32, k=0):
    return ((torch.arange(m, dtype=torch.float64) - m // 3 + k) * (r + 1) / 8).to(dtype)
for dt in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
    t = base(300, dt); dist.all_reduce(t); rec(f"sum {dt}", t)
    t = base(70, dt); dist.all_reduce(t, op=dist.ReduceOp.AVG); rec(f"avg {dt}", t)
t = base(50); dist.all_reduce(t, op=dist.ReduceOp.MAX); rec("max", t)
t = torch.arange(10) * (r + 1); dist.all_reduce(t); rec("int64", t)
ts = [base(300 + 7 * i, k=i) for i in range(6)]
works = [dist.all_reduce(x, async_op=True) for x in ts]
for w in works: w.wait()
rec("async", ts)
ts = [base(33), base(5, k=1), base(100, k=2)]
dist.all_reduce_coalesced(ts); rec("coalesced", ts)
o = torch.zeros(40); dist.reduce_scatter_tensor(o, base(40 * n)); rec("reduce_scatter_tensor", o)
o = torch.zeros(40, dtype=torch.bfloat16)
dist.reduce_scatter_tensor(o, base(40 * n, torch.bfloat16), op=dist.ReduceOp.AVG)
rec("reduce_scatter_tensor avg bf16", o)
o = torch.zeros(30); dist.reduce_scatter(o, [base(30, k=i) for i in range(n)])
rec("reduce_scatter", o)
o = torch.zeros(n * 5); dist.all_gather_into_tensor(o, base(5)); rec("all_gather_into_tensor", o)
g = [torch.zeros(5) for _ in range(n)]; dist.all_gather(g, base(5)); rec("all_gather", g)
b = base(9); dist.broadcast(b, src=1); rec("broadcast", b)
o = torch.zeros(2 * n); dist.all_to_all_single(o, torch.arange(2. * n) + 100 * r)
rec("all_to_all_single", o)
if r == 0:
    dist.send(base(4), 1)
else:
    t = torch.zeros(4); dist.recv(t, 0); rec("send/recv", t)
dist.barrier()
e = torch.zeros(0); dist.all_reduce(e); rec("empty", e)
g = torch.Generator().manual_seed(1000 + r)
x = torch.randn(2000, generator=g) * 10.0 ** torch.randint(-3, 3, (2000,), generator=g)
res["random in"] = x.double().tolist()
dist.all_reduce(x); rec("random", x)
if backend == "netsum":
    t = base(64); dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5)); rec("premul 0.5", t)
    pg = dist.group.WORLD
    res["ledger"] = pg.ledger.to_dict()
    pg.close()
json.dump(res, open(f"{out}/rank{r}.json", "w"))
dist.destroy_process_group()
'''

#: What goes where (docs/training.md, "Every collective"): the expectation of the routes.
SWITCHED = {"allreduce": 8 + 6 + 2, "allreduce_coalesced": 1}
SWITCHED_SCATTER = {"reduce_scatter_single": 2, "reduce_scatter": 1}
DELEGATED = {"allreduce": 2, "all_gather_single": 1, "allgather": 1, "broadcast": 1,
             "all_to_all_single": 1, "barrier": 1}
EXACT = [k for k in ("sum torch.float32", "sum torch.bfloat16", "sum torch.float16",
                     "sum torch.float64", "avg torch.float32", "avg torch.bfloat16",
                     "avg torch.float16", "avg torch.float64", "max", "int64", "async",
                     "coalesced", "reduce_scatter_tensor", "reduce_scatter_tensor avg bf16",
                     "reduce_scatter", "all_gather_into_tensor", "all_gather", "broadcast",
                     "all_to_all_single", "empty")]


def bound(xs: list[np.ndarray], k: int = K_DEFAULT) -> np.ndarray:
    """docs/quantization.md for the sum of n float32 tensors, from the inputs."""
    n = len(xs)
    s = max(t for t in range(64) if n * 2 ** t <= 2 ** 31 - 1)
    out = np.zeros(len(xs[0]))
    for b in range(0, len(xs[0]), k):
        peak = max(float(np.max(np.abs(x[b:b + k]))) for x in xs)
        if peak > 0:
            out[b:b + k] = n * 2.0 ** (min(max(math.ceil(math.log2(peak)), -126), 128) - s - 1)
    return out + 2.0 ** -24 * np.abs(np.sum(np.stack(xs), axis=0))


def test_every_collective_through_the_netsum_backend_equals_gloo(tmp_path: Path) -> None:
    script = tmp_path / "collectives.py"
    script.write_text(SCRIPT)
    got: dict[str, list[dict[str, object]]] = {}
    with Rig(RigConfig(tmp_path / "rig", workers=2)) as rig:
        rig.detach_controller()
        for comm in ("gloo", "netsum"):
            out = tmp_path / comm
            out.mkdir()
            children = start_ranks(rig, comm, out, TrainOptions(tmp_path, ranks=2),
                                   script=script)
            ok, error = wait_ranks(children, 240)
            assert ok, f"{comm}: {error}\n" + "\n".join(c.log_tail(30) for c in children)
            got[comm] = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
        with Controller(load_topology(rig.topology_path)) as ctl:
            ctl.connect()
            ctl.adopt()
            assert dict(ctl.jobs) == {}, "rank 0 deletes the job's lanes at close"
    for r in range(2):
        ns, gl = got["netsum"][r], got["gloo"][r]
        for key in EXACT:
            assert ns[key] == gl[key], f"rank {r}: {key}: netsum {ns[key]} != gloo {gl[key]}"
        if r == 1:
            assert ns["send/recv"] == gl["send/recv"]
        xs = [np.asarray(got["netsum"][q]["random in"]) for q in range(2)]
        want = xs[0] + xs[1]
        diff = np.abs(np.asarray(ns["random"][0]) - want)
        assert np.all(diff <= bound(xs)), f"rank {r}: random sum beyond the bound"
        # PREMUL_SUM (gloo has none): sum of 0.5 x each input, from the inputs.
        base = (np.arange(64) - 64 // 3) / 8
        assert ns["premul 0.5"] == [list(0.5 * base * 1 + 0.5 * base * 2)]
        ledger = ns["ledger"]
        assert isinstance(ledger, dict)
        for name, calls in SWITCHED.items():
            assert ledger[name]["switch"]["calls"] == calls, (name, ledger[name])
        for name, calls in SWITCHED_SCATTER.items():
            assert ledger[name]["switch (reduce-scatter)"]["calls"] == calls, \
                (name, ledger[name])
        for name, calls in DELEGATED.items():
            assert ledger[name]["gloo"]["calls"] == calls, (name, ledger[name])
        assert ledger["allreduce"]["local"]["calls"] == 1           # the empty tensor
        # bytes are the tensors' own: 300 bf16 values are 600 bytes
        assert ledger["allreduce"]["switch"]["bytes"] == (
            300 * (4 + 2 + 2 + 8) + 70 * (4 + 2 + 2 + 8) + 4 * sum(300 + 7 * i for i in range(6))
            + 4 * 2000 + 4 * 64)
