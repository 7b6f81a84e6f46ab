"""All-reduce goodput and retransmissions against packet loss, one line per loss-recovery
variant of the worker core, measured side by side in one run on the same switch.

    python benchmarks/loss.py [--size ELEMENTS] [--loss 0,0.01,0.02,0.05,0.1]
                              [--variants before,fixed,fast,fast-fixed] [--repeat N]
                              [--k K] [--quick] [--png PATH]

4 real netsum-worker processes through one netsum-switch daemon configured by the controller
(netsum.rig, frames over UDP on 127.0.0.1).  Loss is the P4 program's drop simulator, set by
the controller on every worker port in both directions before each job, so each direction of
each worker's link loses that share of packets.  Goodput: tensor elements / the slowest
worker's allreduce time (process start-up excluded).  retx: retransmissions of all workers
together; "per use": as a share of the packets the job needed without loss (blocks plus
bootstrap uses, per worker).  Every result is checked against the float64 sum.

Variants (worker command-line timing options):
  before      the congestion window, timers only, cwnd floor 2: the old default
              (--fast-retransmit 0 --window-min 2)
  fixed       the whole window in flight, timers only (--fast-retransmit 0 --fixed-window):
              SwitchML's scheme, the old --fixed-window
  fast        fast retransmit on a gap in the results, cwnd floor 16 (the new default)
  fast-wmin2  fast retransmit with the old cwnd floor of 2 (--window-min 2)
  fast-fixed  fast retransmit with the whole window in flight (--fixed-window)
  fast-rto10  the default with a 10 ms RTO floor (--rto-min 0.01) instead of 5 ms
  fast-rto2   the default with a 2 ms RTO floor (--rto-min 0.002)
  fast8/16    fast retransmit after 8 / 16 later results instead of 3
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from netsum.rig import Mode, Rig, RigConfig, RigError
from netsum.tensors import synthetic_inputs
from netsum.workers import quant
from netsum.wire import K_DEFAULT, K_SUPPORTED

WORKERS = 4
SLOTS = 256

VARIANTS: dict[str, tuple[str, ...]] = {
    "before": ("--fast-retransmit", "0", "--window-min", "2"),
    "fixed": ("--fast-retransmit", "0", "--fixed-window"),
    "fast-wmin2": ("--window-min", "2"),
    "fast": (),
    "fast-fixed": ("--fixed-window",),
    "fast-rto10": ("--rto-min", "0.01"),
    "fast-rto2": ("--rto-min", "0.002"),
    "fast8": ("--fast-retransmit", "8"),
    "fast16": ("--fast-retransmit", "16"),
}


@dataclass(frozen=True, slots=True)
class Point:
    loss: float
    variant: str
    goodput: float      # elements/s, slowest worker (median of the repeats)
    wall: float         # the slowest worker's allreduce time (s), same run
    retx: int           # all workers' retransmissions, same run
    ok: bool            # every repeat finished with a correct sum


def set_loss(rig: Rig, loss: float) -> None:
    ctl = rig.controller
    for h in rig.layout.hosts:
        ctl.set_drop(h.switch, h.port, loss, "both")


def run_point(rig: Rig, loss: float, variant: str, elements: int, repeat: int,
              seed: int) -> Point:
    runs = []
    for r in range(repeat):
        # The drop entries go in before every job: the rig re-pushes the pipeline (and its
        # own loss setting) when a job's slot range would run past the register pool.
        set_loss(rig, loss)
        out = rig.run_job(synthetic_inputs(WORKERS, (elements,), seed=seed + r),
                          worker_args=VARIANTS[variant])
        if not out.ok:
            print(f"  !! loss {loss:g} {variant}: " + "; ".join(
                w.error for w in out.workers if not w.ok), file=sys.stderr)
        slowest = max(w.elapsed_s for w in out.workers)
        runs.append((elements / slowest, slowest,
                     sum(w.retransmissions for w in out.workers), out.ok))
    mid = sorted(runs)[len(runs) // 2]
    return Point(loss, variant, mid[0], mid[1], mid[2], all(x[3] for x in runs))


def write_png(points: list[Point], variants: list[str], path: Path, elements: int,
              k: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for v in variants:
        sel = [p for p in points if p.variant == v]
        ax.plot([100 * p.loss for p in sel], [p.goodput / 1e6 for p in sel], "o-", label=v)
    ax.set_xlabel("loss per port and direction (%)")
    ax.set_ylabel("goodput (M elements/s)")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax.set_title(f"all-reduce of {elements} elements, {WORKERS} workers, K={k}, under loss")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_list(text: str, what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ValueError(f"{what}: empty list")
    return items


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1 << 18, help="tensor elements (256Ki)")
    ap.add_argument("--loss", default="0,0.01,0.02,0.05,0.1")
    ap.add_argument("--variants", default="before,fixed,fast,fast-fixed")
    ap.add_argument("--repeat", type=int, default=1, help="runs per point (the median is shown)")
    ap.add_argument("--k", type=int, default=K_DEFAULT, choices=K_SUPPORTED,
                    help=f"values per packet (default {K_DEFAULT})")
    ap.add_argument("--quick", action="store_true", help="64Ki elements, loss 0 and 5%% only")
    ap.add_argument("--timeout", type=float, default=30.0, help="worker no-progress deadline")
    ap.add_argument("--png", type=Path, default=ROOT / "results" / "bench" / "loss.png")
    a = ap.parse_args()
    try:
        losses = [float(x) for x in parse_list("0,0.05" if a.quick else a.loss, "--loss")]
        variants = parse_list(a.variants, "--variants")
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown:
            raise ValueError(f"unknown variant(s) {', '.join(unknown)}; known: "
                             f"{', '.join(VARIANTS)}")
        if any(not 0 <= x < 1 for x in losses):
            raise ValueError("--loss values must be in [0, 1)")
        if a.size < 1 or a.repeat < 1:
            raise ValueError("--size and --repeat must be at least 1")
    except ValueError as exc:
        print(f"loss.py: error: {exc}", file=sys.stderr)
        return 2
    elements = 1 << 16 if a.quick else a.size
    blocks = quant.num_blocks(elements, a.k)
    uses = WORKERS * (blocks + min(SLOTS, blocks))
    print(f"all-reduce of {elements} elements, {WORKERS} workers, K={a.k}, {SLOTS} slots, embedded "
          f"switch (frames over UDP); loss per worker port and direction")
    print(f"{'loss':>5} {'variant':<11} {'goodput':>12} {'time':>8} {'retx':>7} {'per use':>8} "
          f"{'vs before':>9}  ok")
    points: list[Point] = []
    with tempfile.TemporaryDirectory(prefix="netsum-loss-") as tmp:
        cfg = RigConfig(Path(tmp), workers=WORKERS, k=a.k, mode=Mode.UDP, slots=SLOTS,
                        timeout=a.timeout)
        try:
            with Rig(cfg) as rig:
                for i, loss in enumerate(losses):
                    base: float | None = None
                    for v in variants:
                        p = run_point(rig, loss, v, elements, a.repeat, seed=100 * i)
                        points.append(p)
                        if v == "before":
                            base = p.goodput
                        rel = f"{p.goodput / base:8.2f}x" if base else f"{'':>9}"
                        print(f"{100 * loss:4.0f}% {v:<11} {p.goodput / 1e6:8.4f} M/s "
                              f"{p.wall:7.2f}s {p.retx:7d} {100 * p.retx / uses:7.1f}% {rel}"
                              f"  {'yes' if p.ok else 'NO'}", flush=True)
        except RigError as exc:
            print(f"loss.py: error: {exc}", file=sys.stderr)
            return 1
    for v in variants:
        sel = [p.goodput for p in points if p.variant == v]
        print(f"{v:<11} geometric-mean goodput over the loss rates: "
              f"{statistics.geometric_mean(sel) / 1e6:.4f} M/s")
    write_png(points, variants, a.png, elements, a.k)
    print(f"wrote {a.png}")
    return 0 if all(p.ok for p in points) else 1


if __name__ == "__main__":
    sys.exit(main())
