"""The training sweep's plots, drawn from its CSV files (no Mininet, no torch):

- `speedup_vs_batch.png` / `speedup_vs_bw.png`: each netsum variant's iteration-time speed-up
  over gloo's ring (median over repetitions, min-max bars) with the link-rate model (with
  overlap, dashed; without, dotted) and 2(n-1)/n;
- `step_vs_batch.png` / `step_vs_bw.png`: each variant's median iteration time with the
  link-rate model's beside it and the measured compute part of the step;
- `step_by_model.png`: the same per model (one point's models side by side);
- `step_vs_workers.png`: median step time per variant against n, star and tree, with the
  model's line;
- `time_to_accuracy.png`: test accuracy against training time, per variant;
- `utilisation.png`: host-link rates over a few steps of one run per variant, steps marked.

    python -m netsum.experiments.trainplots DIR      # redraws DIR's plots
"""
from __future__ import annotations

import csv
import gzip
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from netsum.experiments.points import as_float, read_csv
from netsum.experiments.trainpoints import WARMUP

__all__ = ["write_all"]

_COLOURS = {"gloo": "tab:blue", "netsum-hook": "tab:red", "netsum-backend": "tab:orange"}


def _plt() -> Any:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(plt: Any, fig: Any, path: Path) -> bool:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _ok(r: dict[str, object]) -> bool:
    return str(r.get("ok")) in ("True", "true", "1")


def _title(desc: dict[str, object], rows: Sequence[dict[str, object]]) -> str:
    """The fixed part of a point in words: 'n=4 single, 10 Mb/s links, mlp (85,002
    parameters), batch 16 per rank'."""
    out = []
    if "workers" in desc:
        out.append(f"n={desc['workers']} {desc.get('topo', '')}".strip())
    if "bw_mbps" in desc:
        out.append(f"{as_float(desc['bw_mbps']):g} Mb/s links")
    if "model" in desc:
        params = int(as_float(rows[0]["params"])) if rows and "params" in rows[0] else 0
        out.append(f"{desc['model']} ({params:,} parameters)" if params else str(desc["model"]))
    if "batch" in desc:
        out.append(f"batch {desc['batch']} per rank")
    return ", ".join(out)


def _ticks(ax: Any, values: set[float]) -> None:
    """Ticks at the measured values (a log axis would label powers of its base)."""
    xs = sorted(values)
    ax.set_xticks(xs, [f"{v:g}" for v in xs])
    ax.minorticks_off()


def _panels(rows: Sequence[dict[str, object]], x: str, fixed: Sequence[str]
            ) -> list[tuple[tuple[object, ...], list[dict[str, object]]]]:
    """Rows grouped by the `fixed` columns' values, the groups with more than one `x`."""
    groups: dict[tuple[object, ...], list[dict[str, object]]] = defaultdict(list)
    for r in rows:
        groups[tuple(r[c] for c in fixed)].append(r)
    return [(k, g) for k, g in groups.items() if len({r[x] for r in g}) > 1]


def _speedup(pairs: Sequence[dict[str, object]], x: str, fixed: Sequence[str],
             path: Path, xlabel: str, log: bool) -> bool:
    drawn = _panels(pairs, x, fixed)
    if not drawn:
        return False
    plt = _plt()
    fig, axes = plt.subplots(1, len(drawn), figsize=(6.5 * len(drawn), 4.8), squeeze=False)
    for ax, (key, rows) in zip(axes[0], drawn):
        desc = dict(zip(fixed, key))
        n = int(as_float(desc.get("workers", rows[0]["workers"])))
        for comm in sorted({str(r["comm"]) for r in rows}):
            mine = [r for r in rows if r["comm"] == comm]
            xs = sorted({as_float(r[x]) for r in mine})
            med, lo, hi, mod, ser, rdy = [], [], [], [], [], []
            for v in xs:
                at = [r for r in mine if as_float(r[x]) == v]
                s = [as_float(r["speedup"]) for r in at]
                med.append(statistics.median(s))
                lo.append(med[-1] - min(s))
                hi.append(max(s) - med[-1])
                mod.append(statistics.median(as_float(r["model_speedup"]) for r in at))
                ser.append(statistics.median(as_float(r["serial_model_speedup"]) for r in at))
                rdy.append(statistics.median(as_float(r.get("ready_model_speedup", "nan"))
                                             for r in at))
            c = _COLOURS.get(comm, "black")
            ax.errorbar(xs, med, yerr=[lo, hi], marker="o", color=c, capsize=3,
                        label=f"{comm}: measured (median, min-max)")
            ax.plot(xs, mod, "--", color=c, label=f"{comm}: link-rate model, with overlap")
            ax.plot(xs, rdy, "-.", color=c, alpha=0.8,
                    label=f"{comm}: model, buckets sent as backward produces them")
            ax.plot(xs, ser, ":", color=c, alpha=0.7, label=f"{comm}: model, no overlap")
        ax.axhline(2 * (n - 1) / n, color="gray", lw=0.8, ls=(0, (1, 3)),
                   label=f"2(n-1)/n = {2 * (n - 1) / n:.2f}")
        ax.axhline(1.0, color="gray", lw=0.5)
        if log:
            ax.set_xscale("log", base=2)
            _ticks(ax, {as_float(r[x]) for r in rows})
        ax.set(xlabel=xlabel, ylabel="speed-up over gloo's ring (iteration time)",
               title=_title({k: v for k, v in desc.items() if k != x}, rows), ylim=(0, None))
        ax.legend(fontsize=7)
    return _save(plt, fig, path)


def _compute(r: dict[str, object]) -> float:
    return sum(as_float(r[c]) for c in ("forward_s", "backward_s", "optimizer_s"))


def _step_vs(rows: Sequence[dict[str, object]], x: str, fixed: Sequence[str], path: Path,
             xlabel: str, log: bool) -> bool:
    """Median iteration time per variant against `x`, the link-rate model's (with overlap)
    beside it and the compute part of the step that the model takes as measured."""
    drawn = _panels([r for r in rows if _ok(r)], x, fixed)
    if not drawn:
        return False
    plt = _plt()
    fig, axes = plt.subplots(1, len(drawn), figsize=(6.5 * len(drawn), 4.8), squeeze=False)
    for ax, (key, mine) in zip(axes[0], drawn):
        xs = sorted({as_float(r[x]) for r in mine})
        for comm in sorted({str(r["comm"]) for r in mine}):
            at = [[r for r in mine if r["comm"] == comm and as_float(r[x]) == v] for v in xs]
            vx = [v for v, a in zip(xs, at) if a]
            at = [a for a in at if a]
            c = _COLOURS.get(comm, "black")
            ax.plot(vx, [1e3 * statistics.median(as_float(r["step_s"]) for r in a) for a in at],
                    marker="o", color=c, label=f"{comm}: measured (median)")
            ax.plot(vx, [1e3 * statistics.median(as_float(r["model_overlap_s"]) for r in a)
                         for a in at], "--", marker="x", color=c,
                    label=f"{comm}: link-rate model, with overlap")
        ax.plot(xs, [1e3 * statistics.median(_compute(r) for r in mine if as_float(r[x]) == v)
                     for v in xs], ":", color="gray",
                label="compute (forward + backward + optimizer, measured)")
        if log:
            ax.set_xscale("log", base=2)
            _ticks(ax, set(xs))
        ax.set(xlabel=xlabel, ylabel="iteration time (ms)", ylim=(0, None),
               title=_title(dict(zip(fixed, key)), mine))
        ax.legend(fontsize=7)
    return _save(plt, fig, path)


def _step_by_model(rows: Sequence[dict[str, object]], path: Path) -> bool:
    """One group of bars per model: each variant's median iteration time (bar), the link-rate
    model's (black mark) and the compute part (grey bar inside)."""
    ok = [r for r in rows if _ok(r)]
    models = sorted({str(r["model"]) for r in ok},
                    key=lambda m: statistics.median(as_float(r["params"]) for r in ok
                                                    if r["model"] == m))
    if len(models) < 2:
        return False
    comms = sorted({str(r["comm"]) for r in ok})
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    width = 0.8 / len(comms)
    for j, comm in enumerate(comms):
        for i, m in enumerate(models):
            at = [r for r in ok if r["model"] == m and r["comm"] == comm]
            if not at:
                continue
            xpos = i + (j - (len(comms) - 1) / 2) * width
            step = 1e3 * statistics.median(as_float(r["step_s"]) for r in at)
            ax.bar(xpos, step, width * 0.9, color=_COLOURS.get(comm, "black"),
                   label=f"{comm}: measured (median)" if i == 0 else None)
            ax.bar(xpos, 1e3 * statistics.median(_compute(r) for r in at), width * 0.5,
                   color="gray", label="compute part (measured)" if i == 0 and j == 0 else None)
            ax.plot([xpos - width * 0.45, xpos + width * 0.45],
                    [1e3 * statistics.median(as_float(r["model_overlap_s"]) for r in at)] * 2,
                    color="black", lw=2,
                    label="link-rate model, with overlap" if i == 0 and j == 0 else None)
    params = {m: int(statistics.median(as_float(r["params"]) for r in ok if r["model"] == m))
              for m in models}
    ax.set_xticks(range(len(models)), [f"{m}\n{params[m]:,} parameters" for m in models])
    ax.set_yscale("log")
    r0 = ok[0]
    ax.set(ylabel="iteration time (ms, log)",
           title=f"n={r0['workers']} {r0['topo']}, batch {r0['batch']} per rank, "
           f"{as_float(r0['bw_mbps']):g} Mb/s links")
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


def _step_vs_workers(rows: Sequence[dict[str, object]], path: Path) -> bool:
    ok = [r for r in rows if _ok(r)]
    if len({r["workers"] for r in ok}) < 2:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for (topo, comm), marker in zip(sorted({(str(r["topo"]), str(r["comm"])) for r in ok}),
                                    ["o", "s", "^", "v", "D", "P"]):
        mine = [r for r in ok if r["topo"] == topo and r["comm"] == comm]
        ns = sorted({int(as_float(r["workers"])) for r in mine})
        med = [statistics.median(as_float(r["step_s"]) for r in mine
                                 if int(as_float(r["workers"])) == n) for n in ns]
        mod = [statistics.median(as_float(r["model_overlap_s"]) for r in mine
                                 if int(as_float(r["workers"])) == n) for n in ns]
        c = _COLOURS.get(comm, "black")
        ls = "-" if topo == "single" else "-."
        ax.plot(ns, [1e3 * v for v in med], marker=marker, ls=ls, color=c,
                label=f"{comm}, {topo}: measured")
        ax.plot(ns, [1e3 * v for v in mod], ls="--", color=c, alpha=0.6, marker=marker,
                mfc="none", label=f"{comm}, {topo}: model")
    first = ok[0]
    ax.set(xlabel="ranks (n)", ylabel="median iteration time (ms)",
           title=f"{first['model']} batch {first['batch']}, {as_float(first['bw_mbps']):g} Mb/s "
           "links", ylim=(0, None))
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


def _time_to_accuracy(rows: Sequence[dict[str, object]], steps: Sequence[dict[str, object]],
                      path: Path) -> bool:
    evals: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for s in steps:
        acc = s.get("test_accuracy")
        if acc not in ("", None):
            evals[str(s["run"])].append((as_float(s["train_s"]), as_float(acc)))
    runs = [r for r in rows if len(evals.get(str(r["run"]), [])) > 2]
    if not runs:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for r in runs:
        pts = sorted(evals[str(r["run"])])
        ax.plot([t for t, _ in pts], [100 * a for _, a in pts], marker=".",
                color=_COLOURS.get(str(r["comm"]), "black"),
                label=f"{r['comm']} rep {r['rep']} "
                f"(final {100 * as_float(r['final_test_accuracy']):.2f} %)")
    r0 = runs[0]
    ax.set(xlabel="training time (s, evaluations excluded)", ylabel="test accuracy (%)",
           title=f"{r0['model']} on {r0['data']}, n={r0['workers']}, batch {r0['batch']}, "
           f"{as_float(r0['bw_mbps']):g} Mb/s links")
    ax.legend(fontsize=7)
    return _save(plt, fig, path)


def _utilisation(rows: Sequence[dict[str, object]], steps: Sequence[dict[str, object]],
                 tel_path: Path, path: Path, nsteps: int = 4) -> bool:
    if not tel_path.exists():
        return False
    ok = [r for r in rows if _ok(r)]
    if not ok:
        return False
    # One run per variant: the first repetition of the point with the most workers.
    n = max(int(as_float(r["workers"])) for r in ok)
    chosen: dict[str, dict[str, object]] = {}
    for r in ok:
        if int(as_float(r["workers"])) == n and str(r["comm"]) not in chosen:
            chosen[str(r["comm"])] = r
    want = {str(r["run"]) for r in chosen.values()}
    series: dict[str, dict[tuple[str, str], list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list))
    with gzip.open(tel_path, "rt", newline="") as fh:
        for t in csv.DictReader(fh):
            if t["run"] in want:
                series[t["run"]][(t["node"], t["metric"])].append(
                    (float(t["wall0"]) + float(t["t_s"]), float(t["value"])))
    plt = _plt()
    fig, axes = plt.subplots(len(chosen), 1, figsize=(9, 2.8 * len(chosen)), squeeze=False,
                             sharex=True)     # the same time scale: who finishes first shows
    for ax, (comm, r) in zip(axes[:, 0], sorted(chosen.items())):
        starts = [as_float(s["t_wall"]) for s in steps if s["run"] == r["run"]]
        if len(starts) < 6:
            continue
        t0, t1 = starts[WARMUP], starts[min(WARMUP + nsteps, len(starts) - 1)]
        bw = as_float(r["bw_mbps"])
        for (node, metric), pts in sorted(series[str(r["run"])].items()):
            # Rates over pairs of sampling intervals: a 0.1 s interval holds a handful of
            # 1.5 kB frames at these rates, so single intervals show sampling jitter.
            pts = sorted(pts)[::2]
            xs, ys = [], []
            for (ta, va), (tb, vb) in zip(pts, pts[1:]):
                if t0 <= ta <= t1 and tb > ta:
                    xs.append((ta + tb) / 2 - t0)
                    ys.append((vb - va) * 8 / (tb - ta) / 1e6)
            ax.plot(xs, ys, lw=0.8, ls="-" if metric == "tx_bytes" else "--",
                    label=f"{node} {'up' if metric == 'tx_bytes' else 'down'}")
        for s in starts[WARMUP:WARMUP + 1 + nsteps]:
            ax.axvline(s - t0, color="gray", lw=0.6, ls=":")
        if bw:
            ax.axhline(bw, color="black", lw=0.8, label=f"link rate {bw:g} Mb/s")
        ax.set(title=f"{comm}: host links over {nsteps} steps (dotted: step starts), "
               f"{r['model']} b={r['batch']}, n={r['workers']} {r['topo']}",
               xlabel=f"time from the start of step {WARMUP + 1} (s)",
               ylabel="host link rate (Mb/s, 0.2 s means)", ylim=(0, 1.3 * bw if bw else None))
        ax.legend(fontsize=6, ncol=4, loc="lower right")
    return _save(plt, fig, path)


def write_all(out: Path) -> list[Path]:
    """Every plot the sweep's CSV files in `out` have data for; the paths written."""
    rows = read_csv(out / "results.csv") if (out / "results.csv").exists() else []
    pairs = read_csv(out / "pairs.csv") if (out / "pairs.csv").exists() else []
    steps = read_csv(out / "steps.csv") if (out / "steps.csv").exists() else []
    done = []
    if _speedup(pairs, "batch", ("topo", "workers", "bw_mbps", "model"),
                out / "speedup_vs_batch.png", "batch per rank", True):
        done.append(out / "speedup_vs_batch.png")
    if _speedup(pairs, "bw_mbps", ("topo", "workers", "model", "batch"),
                out / "speedup_vs_bw.png", "link rate (Mb/s)", False):
        done.append(out / "speedup_vs_bw.png")
    if _step_vs(rows, "batch", ("topo", "workers", "bw_mbps", "model"),
                out / "step_vs_batch.png", "batch per rank", True):
        done.append(out / "step_vs_batch.png")
    if _step_vs(rows, "bw_mbps", ("topo", "workers", "model", "batch"),
                out / "step_vs_bw.png", "link rate (Mb/s)", True):
        done.append(out / "step_vs_bw.png")
    if _step_by_model(rows, out / "step_by_model.png"):
        done.append(out / "step_by_model.png")
    if _step_vs_workers(rows, out / "step_vs_workers.png"):
        done.append(out / "step_vs_workers.png")
    if _time_to_accuracy(rows, steps, out / "time_to_accuracy.png"):
        done.append(out / "time_to_accuracy.png")
    if _utilisation(rows, steps, out / "telemetry.csv.gz", out / "utilisation.png"):
        done.append(out / "utilisation.png")
    return done


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m netsum.experiments.trainplots DIR")
    for p in write_all(Path(sys.argv[1])):
        print(p)
