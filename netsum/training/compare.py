"""`netsum train`: the digits example through the switch and with gloo, side by side.

Owns one comparison run: a rig (switch daemon, pipeline and forwarding pushed by the
controller, no job: the training job registers itself from its ranks), then for each
communication variant N rank processes of `examples/train_digits.py` with the environment
torchrun would give them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) plus
NETSUM_TOPOLOGY and this rank's transport (NETSUM_FRAMES: its UDP-tunnel switch port; or
NETSUM_NETNS: its host's namespace, as root).  The ranks themselves stay in the root namespace
so that gloo and the store use loopback in both modes; only their netsum sockets live in the
namespaces.  Writes `training.csv` (one row per variant and step) and `training.png` (loss
curves, test accuracy, step time split) and returns the summaries.
"""
from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netsum.paths import CHECKOUT
from netsum.procs import Child
from netsum.rig import Mode, Rig, RigConfig, RigError
from netsum.training.launch import free_tcp_port, rank_env

__all__ = ["TrainOptions", "VariantResult", "run_training", "start_ranks", "wait_ranks",
           "write_csv", "write_png", "EXAMPLE", "summary_table"]

EXAMPLE = (CHECKOUT or Path.cwd()) / "examples" / "train_digits.py"


@dataclass(frozen=True, slots=True)
class TrainOptions:
    out: Path
    ranks: int = 2
    steps: int = 200
    comms: tuple[str, ...] = ("netsum-hook", "gloo")
    mode: Mode = Mode.UDP
    lanes: int = 4
    slots: int = 256
    timeout: float = 60.0                # the process group's timeout (s): the deadline
    netsum_timeout: float | None = None  # NETSUM_TIMEOUT: overrides the deadline
    extra: tuple[str, ...] = ()          # more example options (--lr, --batch, --delay, ...)


@dataclass(frozen=True, slots=True)
class VariantResult:
    comm: str
    ok: bool
    error: str
    wall_s: float
    metrics: dict[str, object]           # rank 0's metrics.json ({} on failure)

    @property
    def accuracy(self) -> float:
        v = self.metrics.get("final_test_accuracy")
        return float(v) if isinstance(v, (int, float)) else float("nan")

    def mean(self, key: str, skip: int = 5) -> float:
        """Mean of a per-step figure over the steps after the first `skip` (warm-up)."""
        rows = self.metrics.get("steps_log")
        if not isinstance(rows, list) or len(rows) <= skip:
            return float("nan")
        vals = [float(r[key]) for r in rows[skip:]]
        return sum(vals) / len(vals)


def start_ranks(rig: Rig, comm: str, out: Path, options: TrainOptions,
                args: Sequence[str] = (), script: Path = EXAMPLE) -> list[Child]:
    """Start the ranks of one variant (torchrun's environment, one process per rank); `script`
    gets the example's options."""
    port = free_tcp_port()
    children = []
    for rank in range(options.ranks):
        env = {**rank_env(rig, rank, options.ranks, port), "OMP_NUM_THREADS": "1"}
        if options.netsum_timeout is not None:
            env["NETSUM_TIMEOUT"] = str(options.netsum_timeout)
        argv = [sys.executable, str(script), "--comm", comm, "--steps", str(options.steps),
                "--lanes", str(options.lanes), "--slots", str(options.slots),
                "--timeout", str(options.timeout), "--out", str(out), *options.extra, *args]
        children.append(rig.procs.start(f"{comm}-rank{rank}-{port}", argv, env=env))
    return children


def wait_ranks(children: Sequence[Child], limit: float,
               on_tick: Callable[[], None] | None = None) -> tuple[bool, str]:
    """Wait for every rank; (all exited 0, the first error line found in the logs)."""
    deadline = time.monotonic() + limit
    while any(c.alive() for c in children):
        if time.monotonic() > deadline:
            for c in children:
                if c.alive():
                    c.popen.kill()
            return False, f"ranks still running after {limit:.0f} s (killed)"
        if on_tick is not None:
            on_tick()
        for c in children:
            try:
                c.popen.wait(0.2)
            except subprocess.TimeoutExpired:
                pass
    errors = []
    for c in children:
        for line in c.log_tail(50).splitlines():
            if "error:" in line:
                errors.append(line.strip())
        if c.popen.returncode != 0 and not errors:
            errors.append(f"{c.name}: exit status {c.popen.returncode}: "
                          f"{c.log_tail(3).strip()}")
    ok = all(c.popen.returncode == 0 for c in children)
    return ok, "; ".join(errors[:3])


def run_variant(rig: Rig, comm: str, options: TrainOptions,
                say: Callable[[str], None]) -> VariantResult:
    out = options.out / comm
    started = time.monotonic()
    children = start_ranks(rig, comm, out, options)

    def tick() -> None:
        for name, sw in rig.switches.items():
            if not sw.alive():
                raise RigError(f"switch {name} exited during training: {sw.log_tail(5)}")

    ok, error = wait_ranks(children, 60 + options.steps * 2.0, tick)
    for c in children:
        line = next((ln for ln in reversed(c.log_tail(30).splitlines())
                     if "test accuracy" in ln), "")
        if line and c is children[0]:
            say(line.strip())
    wall = time.monotonic() - started
    metrics: dict[str, object] = {}
    try:
        metrics = json.loads((out / "metrics.json").read_text())
    except (OSError, ValueError):
        ok = False
        error = error or "rank 0 wrote no metrics.json"
    return VariantResult(comm, ok, error, wall, metrics)


def run_training(options: TrainOptions, say: Callable[[str], None] = print) -> list[VariantResult]:
    options.out.mkdir(parents=True, exist_ok=True)
    cfg = RigConfig(options.out / "rig", workers=options.ranks, mode=options.mode,
                    slots=options.slots, timeout=options.timeout)
    results = []
    with Rig(cfg, say) as rig:
        rig.detach_controller()
        say(f"netsum train: switch up ({options.mode.value} mode), {options.ranks} ranks, "
            f"{options.steps} steps; variants: {', '.join(options.comms)}")
        for comm in options.comms:
            say(f"netsum train: {comm} ...")
            res = run_variant(rig, comm, options, say)
            results.append(res)
            if not res.ok:
                say(f"netsum train: {comm} failed: {res.error}")
    write_csv(options.out / "training.csv", results)
    write_png(options.out / "training.png", results)
    return results


_COLUMNS = ("comm", "step", "loss", "test_accuracy", "wall_s", "compute_s", "exposed_s",
            "comm_s", "hidden_s", "buckets")


def write_csv(path: Path, results: Sequence[VariantResult]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(_COLUMNS)
        for res in results:
            evals = {int(e["step"]): float(e["test_accuracy"]) for e in _rows(res, "evals")}
            for row in _rows(res, "steps_log"):
                step = int(row["step"])
                acc = evals.get(step)
                w.writerow([res.comm, step, f"{row['loss']:.6f}",
                            "" if acc is None else f"{acc:.4f}",
                            *(f"{row[k]:.6f}" for k in _COLUMNS[4:9]), row["buckets"]])


def _rows(res: VariantResult, key: str) -> list[dict[str, Any]]:
    rows = res.metrics.get(key)
    return rows if isinstance(rows, list) else []


def summary_table(results: Sequence[VariantResult]) -> str:
    head = (f"{'variant':15} {'ok':3} {'test acc':>8} {'step ms':>8} {'compute':>8} "
            f"{'exposed':>8} {'comm':>8} {'hidden':>8} {'hidden %':>8}")
    lines = [head, "-" * len(head)]
    for r in results:
        comm, hidden = r.mean("comm_s"), r.mean("hidden_s")
        frac = 100 * hidden / comm if comm and comm == comm and comm > 0 else float("nan")
        lines.append(f"{r.comm:15} {'yes' if r.ok else 'NO':3} {100 * r.accuracy:7.2f}% "
                     f"{1e3 * r.mean('wall_s'):8.2f} {1e3 * r.mean('compute_s'):8.2f} "
                     f"{1e3 * r.mean('exposed_s'):8.2f} {1e3 * comm:8.2f} "
                     f"{1e3 * hidden:8.2f} {frac:7.1f}%")
    return "\n".join(lines)


def _ms(seconds: float) -> float:
    return 1e3 * seconds if math.isfinite(seconds) else 0.0


def write_png(path: Path, results: Sequence[VariantResult]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4.5))
    for r in results:
        rows = r.metrics.get("steps_log") or []
        if not isinstance(rows, list) or not rows:
            continue
        steps = [int(x["step"]) for x in rows]
        loss = [float(x["loss"]) for x in rows]
        # A running mean: per-batch losses of 32 samples are noisy.
        win = 10
        smooth = [sum(loss[max(0, i - win + 1):i + 1]) / len(loss[max(0, i - win + 1):i + 1])
                  for i in range(len(loss))]
        a1.plot(steps, smooth, label=f"{r.comm} (final test acc {100 * r.accuracy:.1f}%)")
        evals = r.metrics.get("evals") or []
        if isinstance(evals, list):
            a2.plot([int(e["step"]) for e in evals],
                    [100 * float(e["test_accuracy"]) for e in evals], marker="o", ms=3,
                    label=r.comm)
    a1.set(title="training loss (rank 0, running mean of 10)", xlabel="step",
           ylabel="cross-entropy")
    if a1.get_legend_handles_labels()[0]:
        a1.legend()
    a2.set(title="test accuracy", xlabel="step", ylabel="%")
    if a2.get_legend_handles_labels()[0]:
        a2.legend()
    names = [r.comm if r.ok else f"{r.comm} (failed)" for r in results]
    # A variant that failed has no step figures (NaN): its bar is empty, not the plot's limits.
    wall = [_ms(r.mean("wall_s")) for r in results]
    traced = [r.mean("comm_s") > 0 for r in results]
    exposed = [_ms(r.mean("exposed_s")) if t else 0.0 for r, t in zip(results, traced)]
    hidden = [_ms(r.mean("hidden_s")) if t else 0.0 for r, t in zip(results, traced)]
    alone = [w - e - h if t else 0.0 for w, e, h, t in zip(wall, exposed, hidden, traced)]
    untraced = [0.0 if t else w for w, t in zip(wall, traced)]
    a3.bar(names, alone, color="tab:blue", label="compute, no communication running")
    a3.bar(names, hidden, bottom=alone, color="tab:green",
           label="compute overlapped with communication")
    a3.bar(names, exposed, bottom=[a + h for a, h in zip(alone, hidden)], color="tab:orange",
           label="exposed communication (waiting)")
    if any(untraced):
        a3.bar(names, untraced, color="tab:gray", label="step (no hook: not split)")
    a3.set(title="mean step time (steps 6..)", ylabel="ms per step",
           ylim=(0, 1.45 * max([*wall, 1e-3])))
    a3.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
