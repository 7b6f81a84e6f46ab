"""`netsum train`: the digits example through the switch and with gloo, side by side.

Owns one comparison run: a rig (switch daemon, pipeline and forwarding pushed by the
controller, no job: the training job registers itself from its ranks), then for each
communication variant N rank processes of `examples/train_digits.py` with the environment
torchrun would give them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) plus
NETSUM_TOPOLOGY and this rank's transport (NETSUM_FRAMES: its UDP-tunnel switch port; or
NETSUM_NETNS: its host's namespace, as root).  The ranks themselves stay in the root namespace
so that gloo and the store use loopback in both modes; only their netsum sockets live in the
namespaces.  Writes `training.csv` (one row per variant and step) and `training.png` (loss
curves, each netsum variant's per-step loss difference from gloo, bytes per step through the
switch, step time split) and returns the summaries; `summary_table` adds each variant's final
loss against gloo's and its calls and bytes through the switch and delegated to gloo.
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
from netsum.wire import K_DEFAULT

__all__ = ["TrainOptions", "VariantResult", "run_training", "start_ranks", "wait_ranks",
           "write_csv", "write_png", "EXAMPLE", "summary_table", "routes"]

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
    k: int = K_DEFAULT                   # values per packet: the switch's build (NETSUM_K)


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

    @property
    def final_loss(self) -> float:
        v = self.metrics.get("final_loss")
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
                    slots=options.slots, timeout=options.timeout, k=options.k)
    results = []
    with Rig(cfg, say) as rig:
        rig.detach_controller()
        say(f"netsum train: switch up ({options.mode.value} mode, K={options.k}), "
            f"{options.ranks} ranks, "
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
            "comm_s", "hidden_s", "buckets", "switch_bytes")


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
                            *(f"{row[k]:.6f}" for k in _COLUMNS[4:9]), row["buckets"],
                            row.get("switch_bytes", 0)])


def _rows(res: VariantResult, key: str) -> list[dict[str, Any]]:
    rows = res.metrics.get(key)
    return rows if isinstance(rows, list) else []


def routes(res: VariantResult) -> tuple[int, int, int, int] | None:
    """(switched calls, switched bytes, gloo calls, gloo bytes) of rank 0's ledger, or None
    for a run without one (gloo)."""
    ledger = res.metrics.get("ledger")
    if not isinstance(ledger, dict):
        return None
    sc = sb = gc = gb = 0
    for per_route in ledger.values():
        for route, t in per_route.items():
            if route.startswith("switch"):
                sc, sb = sc + int(t["calls"]), sb + int(t["bytes"])
            elif route == "gloo":
                gc, gb = gc + int(t["calls"]), gb + int(t["bytes"])
    return sc, sb, gc, gb


def _kb(n: int) -> str:
    return f"{n / 1024:.0f}K" if n < 10 * 1024 * 1024 else f"{n / 1048576:.0f}M"


def summary_table(results: Sequence[VariantResult]) -> str:
    """One line per variant: accuracy, final loss and its difference from gloo's, the step
    time split, and the calls and bytes through the switch and delegated to gloo (rank 0)."""
    gloo = next((r for r in results if r.comm == "gloo" and r.ok), None)
    head = (f"{'variant':15} {'ok':3} {'test acc':>8} {'final loss':>10} {'- gloo':>9} "
            f"{'step ms':>8} {'compute':>8} {'exposed':>8} {'comm':>8} {'hidden %':>8} "
            f"{'switched':>15} {'to gloo':>13}")
    lines = [head, "-" * len(head)]
    for r in results:
        comm, hidden = r.mean("comm_s"), r.mean("hidden_s")
        frac = 100 * hidden / comm if comm and comm == comm and comm > 0 else float("nan")
        loss = r.final_loss
        diff = loss - gloo.final_loss if gloo is not None and r is not gloo else float("nan")
        rt = routes(r)
        sw = f"{rt[0]} / {_kb(rt[1])}" if rt else "-"
        gl = f"{rt[2]} / {_kb(rt[3])}" if rt else "-"
        lines.append(f"{r.comm:15} {'yes' if r.ok else 'NO':3} {100 * r.accuracy:7.2f}% "
                     f"{loss:10.5f} {diff:9.2g} {1e3 * r.mean('wall_s'):8.2f} "
                     f"{1e3 * r.mean('compute_s'):8.2f} {1e3 * r.mean('exposed_s'):8.2f} "
                     f"{1e3 * comm:8.2f} {frac:7.1f}% {sw:>15} {gl:>13}")
    return "\n".join(lines)


def _ms(seconds: float) -> float:
    return 1e3 * seconds if math.isfinite(seconds) else 0.0


def write_png(path: Path, results: Sequence[VariantResult]) -> None:
    """Loss curves; the per-step loss difference of each netsum variant from gloo (symmetric
    log scale: the curves themselves lie on top of each other); bytes per step through the
    switch; the step time split."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ((a1, a2), (a3, a4)) = plt.subplots(2, 2, figsize=(14, 9))
    losses: dict[str, dict[int, float]] = {}
    for r in results:
        rows = _rows(r, "steps_log")
        if not rows:
            continue
        steps = [int(x["step"]) for x in rows]
        loss = [float(x["loss"]) for x in rows]
        losses[r.comm] = dict(zip(steps, loss))
        # A running mean: per-batch losses of 32 samples are noisy.
        win = 10
        smooth = [sum(loss[max(0, i - win + 1):i + 1]) / len(loss[max(0, i - win + 1):i + 1])
                  for i in range(len(loss))]
        a1.plot(steps, smooth, label=f"{r.comm} (final test acc {100 * r.accuracy:.1f}%)")
        a3.plot(steps, [float(x.get("switch_bytes", 0)) / 1024 for x in rows], label=r.comm)
    a1.set(title="training loss (rank 0, running mean of 10)", xlabel="step",
           ylabel="cross-entropy")
    base = losses.get("gloo")
    tiny = 1e-9
    styles = iter(["-", "--", ":", "-."] * 4)
    for name, per in losses.items():
        if name == "gloo" or base is None:
            continue
        steps = sorted(set(per) & set(base))
        # Distinct line styles: two netsum variants may coincide step for step.
        a2.plot(steps, [per[s] - base[s] for s in steps], next(styles), marker=".", ms=3,
                lw=0.8,
                label=f"{name} - gloo (max |diff| "
                f"{max((abs(per[s] - base[s]) for s in steps), default=0):.2g})")
    a2.set_yscale("symlog", linthresh=tiny)
    a2.axhline(0, color="gray", lw=0.5)
    a2.set(title="per-step loss difference from gloo (same batches; symlog, linear below "
           f"{tiny:g})", xlabel="step", ylabel="loss difference")
    a3.set(title="bytes per step through the switch (rank 0's tensors)", xlabel="step",
           ylabel="KiB")
    for ax in (a1, a2, a3):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    names = [r.comm if r.ok else f"{r.comm} (failed)" for r in results]
    # A variant that failed has no step figures (NaN): its bar is empty, not the plot's limits.
    wall = [_ms(r.mean("wall_s")) for r in results]
    traced = [r.mean("comm_s") > 0 for r in results]
    exposed = [_ms(r.mean("exposed_s")) if t else 0.0 for r, t in zip(results, traced)]
    hidden = [_ms(r.mean("hidden_s")) if t else 0.0 for r, t in zip(results, traced)]
    alone = [w - e - h if t else 0.0 for w, e, h, t in zip(wall, exposed, hidden, traced)]
    untraced = [0.0 if t else w for w, t in zip(wall, traced)]
    a4.bar(names, alone, color="tab:blue", label="compute, no communication running")
    a4.bar(names, hidden, bottom=alone, color="tab:green",
           label="compute overlapped with communication")
    a4.bar(names, exposed, bottom=[a + h for a, h in zip(alone, hidden)], color="tab:orange",
           label="exposed communication (waiting)")
    if any(untraced):
        a4.bar(names, untraced, color="tab:gray", label="step (no hook: not split)")
    a4.set(title="mean step time (steps 6..)", ylabel="ms per step",
           ylim=(0, 1.45 * max([*wall, 1e-3])))
    a4.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
