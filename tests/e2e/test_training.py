"""PyTorch training through the real switch (netsum-switch daemon, P4Runtime controller, frames
over UDP-tunnel ports): the digits example with the DDP hook against the same run with gloo,
the torch.distributed backend, and a rank killed mid-training.

Expectations come from outside the code under test: gloo's training run, and the quantization
bound of docs/quantization.md computed here from the step-1 bucket inputs (each rank's local
gradients), never from the switch's answer.
"""
from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (the `train` extra: "
                    "pip install -e '.[train]', torch==2.13.0 CPU)")
pytest.importorskip("sklearn", reason="scikit-learn is not installed (the `train` extra)")

from netsum.controller.fabric import Controller  # noqa: E402
from netsum.controller.topology import load_topology  # noqa: E402
from netsum.rig import Mode, Rig, RigConfig  # noqa: E402
from netsum.training.compare import (TrainOptions, VariantResult, run_training,  # noqa: E402
                                     start_ranks, wait_ranks)
from netsum.wire import K_DEFAULT  # noqa: E402

pytestmark = pytest.mark.slow
STEPS = 200
#: The blocks the bound is computed over: the K the run uses (RigConfig's and register()'s
#: default).
K = K_DEFAULT


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[VariantResult]]:
    out = tmp_path_factory.mktemp("train")
    opts = TrainOptions(out, ranks=2, steps=STEPS, comms=("netsum-hook", "gloo"),
                        extra=("--dump-step1",))
    return out, run_training(opts, say=lambda _m: None)


def test_training_through_the_switch_matches_gloo_accuracy(
        comparison: tuple[Path, list[VariantResult]]) -> None:
    out, (netsum, gloo) = comparison
    assert netsum.ok, netsum.error
    assert gloo.ok, gloo.error
    assert gloo.accuracy > 0.9, "the baseline did not learn: the comparison would say nothing"
    assert abs(netsum.accuracy - gloo.accuracy) <= 0.01
    log = netsum.metrics["steps_log"]
    assert isinstance(log, list) and len(log) == STEPS
    # torch 2.13's DDP reduces step 1 as one bucket, then rebuilds its buckets from the order
    # gradients became ready: several per step from step 2 on.  The layout was compared
    # across ranks for step 1 and once more after the rebuild, and never again.
    assert log[0]["buckets"] == 1
    assert all(row["buckets"] >= 2 for row in log[1:])
    assert netsum.metrics["layout_checks"] == 2
    assert (out / "training.csv").read_text().count("\n") == 2 * STEPS + 1
    assert (out / "training.png").stat().st_size > 10_000


def _bound_from_inputs(xs: list[np.ndarray], k: int = K) -> np.ndarray:
    """docs/quantization.md for n workers, per element of the MEAN (sum / n): per block of K,
    E = max over workers of the least e with 2^e >= max|x|; s = the largest s with
    n 2^s <= 2^31 - 1; the sum is off by n 2^(E-s-1) + 2^-24 |sum|, the mean by 1/n of that
    plus its own rounding, 2^-24 |mean|."""
    n = len(xs)
    s = max(t for t in range(64) if n * 2 ** t <= 2 ** 31 - 1)
    out = np.zeros(len(xs[0]))
    for b in range(0, len(xs[0]), k):
        peak = max(float(np.max(np.abs(x[b:b + k]))) for x in xs)
        if peak > 0:
            e = min(max(math.ceil(math.log2(peak)), -126), 128)
            out[b:b + k] = n * 2.0 ** (e - s - 1)
    mean = np.abs(np.sum(np.stack(xs).astype(np.float64), axis=0)) / n
    return out / n + 2.0 ** -24 * mean * 2


def _load(run: Path, rank: int) -> tuple[dict[str, np.ndarray], dict[str, object]]:
    arrays = dict(np.load(run / f"step1-rank{rank}.npz"))
    return arrays, json.loads((run / f"step1-rank{rank}.json").read_text())


def test_parameters_after_step_one_equal_gloos_within_the_quantization_bound(
        comparison: tuple[Path, list[VariantResult]]) -> None:
    _check_step1(comparison[0], K)


def _check_step1(out: Path, k: int) -> None:
    """Rank 0's parameters after step 1 through the switch against gloo's, within the bound
    computed from the step-1 bucket inputs in blocks of `k`."""
    ns = [_load(out / "netsum-hook", r) for r in range(2)]
    gl = [_load(out / "gloo", r) for r in range(2)]
    meta = ns[0][1]
    lr = float(meta["lr"])  # type: ignore[arg-type]
    buckets = meta["buckets"]
    assert isinstance(buckets, list) and len(buckets) >= 1
    bound: dict[str, np.ndarray] = {}
    grad: dict[str, np.ndarray] = {}
    for i, b in enumerate(buckets):
        xs = [ns[r][0][f"bucket{i}"] for r in range(2)]
        # Both runs started from the same parameters on the same batches: same inputs.
        for r in range(2):
            assert np.array_equal(xs[r], gl[r][0][f"bucket{i}"])
        per_elem = _bound_from_inputs(xs, k)
        mean = (xs[0].astype(np.float64) + xs[1]) / 2
        at = 0
        for name in b["params"]:
            shape = ns[0][0][f"param:{name}"].shape
            size = int(np.prod(shape))
            bound[name] = per_elem[at:at + size].reshape(shape)
            grad[name] = mean[at:at + size].reshape(shape)
            at += size
        assert at == len(xs[0]), "a bucket is its parameters' gradients back to back"
    names = [k.split(":", 1)[1] for k in ns[0][0] if k.startswith("param:")]
    assert sorted(bound) == sorted(names)
    for name in names:
        p_ns = ns[0][0][f"param:{name}"].astype(np.float64)
        p_gl = gl[0][0][f"param:{name}"].astype(np.float64)
        assert np.array_equal(ns[0][0][f"param:{name}"], ns[1][0][f"param:{name}"])
        # SGD's first step is p - lr * g in float32: allow its own rounding on both sides.
        allowed = lr * (bound[name] + 2.0 ** -23 * np.abs(grad[name])) + \
            2.0 ** -23 * np.abs(p_gl)
        diff = np.abs(p_ns - p_gl)
        worst = float(np.max(diff / allowed))
        print(f"step 1: {name}: max |netsum - gloo| = {np.max(diff):.3g}, "
              f"{worst:.3f} of the bound")
        assert worst <= 1.0, f"{name}: |netsum - gloo| reaches {worst:.2f} x the bound"
        # The bound is tight enough to mean something: far below the step itself.
        moved = lr * np.abs(grad[name])
        assert float(np.median(bound[name] * lr)) < 1e-3 * float(np.median(moved)) or \
            float(np.median(moved)) == 0.0


def _rank_env_script(tmp: Path) -> Path:
    script = tmp / "backend_ranks.py"
    script.write_text(BACKEND_SCRIPT)
    return script


BACKEND_SCRIPT = r'''
import json, sys, datetime
import torch, torch.distributed as dist
import netsum.training.backend  # registers "netsum"
dist.init_process_group("netsum", timeout=datetime.timedelta(seconds=60))
r, n = dist.get_rank(), dist.get_world_size()
pg = dist.group.WORLD
out = {}
t = torch.arange(100, dtype=torch.float32) * (r + 1)
dist.all_reduce(t)
out["sum"] = t.tolist()
t = torch.full((70,), float(r + 1))
dist.all_reduce(t, op=dist.ReduceOp.AVG)
out["avg"] = t.tolist()
ts = [torch.full((300,), float(i + r)) for i in range(6)]
works = [dist.all_reduce(x, async_op=True) for x in ts]
for w in works: w.wait()
out["async"] = [float(x[0]) for x in ts]
switched = pg.switched
d = torch.tensor([r + 1], dtype=torch.float64); dist.all_reduce(d)
m = torch.tensor([float(r)]); dist.all_reduce(m, op=dist.ReduceOp.MAX)
b = torch.tensor([float(r + 7)]); dist.broadcast(b, src=1)
g = [torch.zeros(2) for _ in range(n)]; dist.all_gather(g, torch.full((2,), float(r)))
dist.barrier()
out.update(f64=d.item(), max=m.item(), bcast=b.item(), gather=[x.tolist() for x in g],
           switched=switched, switched_after=pg.switched, delegated=pg.delegated)
# DDP without a hook: its bucket all-reduces call this group.
model = torch.nn.Linear(4, 3)
ddp = torch.nn.parallel.DistributedDataParallel(model)
before = pg.switched
ddp(torch.full((2, 4), float(r + 1))).sum().backward()
out["ddp_switched"] = pg.switched - before
out["ddp_grad_bias"] = model.bias.grad.tolist()
dist.barrier()
if r == 0:
    print("RESULT " + json.dumps(out), flush=True)
dist.destroy_process_group()   # calls pg.shutdown(): lanes stopped, rank 0 deletes the jobs
print("LANES CLOSED " + str(pg._closed), flush=True)
'''


def test_backend_all_reduce_through_the_switch_and_gloo_for_the_rest(tmp_path: Path) -> None:
    script = _rank_env_script(tmp_path)
    with Rig(RigConfig(tmp_path / "rig", workers=2)) as rig:
        rig.detach_controller()
        # The environment the example's ranks get, another script.
        children = start_ranks(rig, "backend", tmp_path, TrainOptions(tmp_path, ranks=2),
                               script=script)
        ok, error = wait_ranks(children, 120)
        logs = [c.log_tail(40) for c in children]
        assert ok, f"{error}\n" + "\n".join(logs)
        with Controller(load_topology(rig.topology_path)) as ctl:
            ctl.connect()
            ctl.adopt()
            left = dict(ctl.jobs)
    assert left == {}, "rank 0 deletes the job's lanes at destroy_process_group()"
    line = next(ln for ln in logs[0].splitlines() if ln.startswith("RESULT "))
    got = json.loads(line[len("RESULT "):])
    assert got["sum"] == [3.0 * i for i in range(100)]       # small integers: exact
    assert got["avg"] == [1.5] * 70
    assert got["async"] == [2.0 * i + 1 for i in range(6)]
    assert got["switched"] == 8                               # 2 + 6 through the switch
    assert got["switched_after"] == 9              # float64 through the switch, MAX to gloo
    assert got["f64"] == 3.0 and got["max"] == 1.0 and got["bcast"] == 8.0
    assert got["gather"] == [[0.0, 0.0], [1.0, 1.0]]
    assert got["ddp_switched"] >= 1
    # d(sum of outputs)/d(bias) = batch 2 per rank, averaged over the ranks by DDP: 2.
    assert got["ddp_grad_bias"] == [2.0, 2.0, 2.0]
    assert all("LANES CLOSED True" in log for log in logs)


def test_a_rank_killed_mid_training_fails_the_others_clearly(tmp_path: Path) -> None:
    timeout = 3.0       # NETSUM_TIMEOUT, overriding the process group's 60 s
    with Rig(RigConfig(tmp_path / "rig", workers=2)) as rig:
        rig.detach_controller()
        opts = TrainOptions(tmp_path, ranks=2, steps=5000, timeout=60.0, netsum_timeout=timeout,
                            extra=("--eval-every", "10"))
        r0, r1 = start_ranks(rig, "netsum-hook", tmp_path / "out", opts)
        deadline = time.monotonic() + 120
        while "step 20/" not in r0.log_tail(5):
            assert r0.alive() and r1.alive(), r0.log_tail() + r1.log_tail()
            assert time.monotonic() < deadline, "training did not reach step 20"
            time.sleep(0.2)
        os.killpg(r1.popen.pid, signal.SIGKILL)
        killed = time.monotonic()
        ok, error = wait_ranks([r0], timeout + 30)
        waited = time.monotonic() - killed
        log = r0.log_tail(20)
    assert r0.popen.returncode == 1, log
    assert waited < timeout + 30, "rank 0 hung after its peer died"
    assert "train_digits: rank 0: error:" in log
    assert "WorkerTimeoutError" in log and "netsum lane" in log, log
    assert "Unable to cast" not in log, "the future must hold an error, not an exception value"


@pytest.mark.privileged
def test_training_in_network_namespaces(tmp_path: Path, privileged: None) -> None:
    opts = TrainOptions(tmp_path, ranks=2, steps=30, comms=("netsum-hook",), mode=Mode.NETNS)
    (res,) = run_training(opts, say=lambda _m: None)
    assert res.ok, res.error
    assert len(res.metrics["steps_log"]) == 30  # type: ignore[arg-type]


def test_netsum_train_command(tmp_path: Path) -> None:
    import subprocess
    out = tmp_path / "out"
    proc = subprocess.run([str(Path(sys.executable).parent / "netsum"), "train", "--steps", "10",
                           "--comm", "netsum-hook", "--mode", "udp", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "netsum-hook     yes" in proc.stdout
    assert (out / "training.csv").read_text().count("\n") == 11
    assert (out / "training.png").exists()


def test_k_1024_hook_and_backend_against_gloo(tmp_path: Path) -> None:
    """`TrainOptions(k=1024)` (`netsum train --k 1024`): the switch built for K=1024, the ranks
    told by NETSUM_K; the MLP (85,002 parameters: 84 blocks of 1024 in 64 KiB buckets over 4
    lanes).  Step 1's parameters within the bound in blocks of 1024 (from the inputs), and
    both variants' loss at every step within 10^-3 of gloo's largest step-to-step change
    (docs/training.md, the Mininet test's rule)."""
    steps = 6
    model = ("--model", "mlp", "--width", "256", "--bucket-kb", "64")
    # --dump-step1 records DDP's buckets through a comm hook: the hook and gloo only
    hook, gloo = run_training(TrainOptions(tmp_path, ranks=2, steps=steps, k=1024,
                                           comms=("netsum-hook", "gloo"),
                                           extra=("--dump-step1", *model)), say=lambda _m: None)
    (backend,) = run_training(TrainOptions(tmp_path / "b", ranks=2, steps=steps, k=1024,
                                           comms=("netsum-backend",), extra=model),
                              say=lambda _m: None)
    results = [hook, backend, gloo]
    for res in results:
        assert res.ok, f"{res.comm}: {res.error}"
    for res in (hook, backend):
        assert res.metrics["k"] == 1024
        packets = res.metrics["packets"]
        assert isinstance(packets, dict)
        # 85,002 float32 a step in blocks of 1024: at least 84 data packets a step
        assert packets["packets"] >= 84 * steps
    _check_step1(tmp_path, 1024)
    losses = {r.comm: [float(row["loss"]) for row in r.metrics["steps_log"]]  # type: ignore
              for r in results}
    ref = losses["gloo"]
    change = max(abs(a - b) for a, b in zip(ref, ref[1:]))
    for comm in ("netsum-hook", "netsum-backend"):
        worst = max(abs(a - b) for a, b in zip(losses[comm], ref))
        assert worst <= 1e-3 * change + 1e-6, f"{comm}: loss off gloo's by {worst:.3g}"


def test_ranks_at_another_k_than_the_switch_are_told_so(tmp_path: Path) -> None:
    """A switch built for K=1024, ranks that send K=256 (NETSUM_K overridden): registration
    fails on every rank with the reason, instead of timing out on packets of the wrong
    length."""
    from netsum.training.launch import LaunchOptions, launch
    lines: list[str] = []
    script = Path(__file__).parents[2] / "examples" / "train_digits.py"
    status = launch(LaunchOptions(script, ("--steps", "2", "--out", str(tmp_path / "o")), 2,
                                  Mode.UDP, tmp_path, env=(("NETSUM_K", "256"),), k=1024),
                    say=lines.append)
    text = "\n".join(lines)
    assert status != 0, text
    assert "switch s1 runs netsum.p4 built for K=1024 (beyond Tofino-class hardware); the " \
        "ranks send K=256" in text, text
