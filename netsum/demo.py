"""`netsum demo`: one all-reduce through the switch, shown live, then reported.

Owns what the demo shows and writes: the live progress line (from the switch's per-job
counters), the per-worker result table, `results.csv` and `allreduce.png` (per-worker goodput
and the chunk-latency distribution) in the output directory.  The run itself is netsum.rig's.
"""
from __future__ import annotations

import csv
import math
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TextIO

from netsum.netns import netns_available
from netsum.rig import (JobOutcome, Mode, Rig, RigConfig, RigError, RunningJob, Target,
                        WorkerOutcome)
from netsum.tensors import synthetic_inputs

__all__ = ["DemoOptions", "choose_mode", "check_memory", "run_demo", "format_table", "write_csv", "write_png"]


@dataclass(frozen=True, slots=True)
class DemoOptions:
    out: Path
    workers: int
    elements: int
    k: int
    loss: float
    mode: Mode | None            # None: netns when root and namespaces work, else udp
    target: Target
    slots: int
    timeout: float
    seed: int
    leaves: int = 0              # 0: one switch; >= 2: root + leaves (mode udp)


def choose_mode(requested: Mode | None, leaves: int = 0) -> tuple[Mode, str]:
    """The mode to run in and why, in words for the user."""
    if requested is not None and requested not in (Mode.UDP, Mode.NETNS):
        raise ValueError(f"mode {requested.value!r}: the demo and training run in "
                         "'netns' or 'udp'")
    if requested is Mode.UDP:
        return Mode.UDP, "as asked"
    if leaves and requested is None:
        return Mode.UDP, "a tree's switch-to-switch links are UDP tunnels"
    reason = netns_available()
    if requested is Mode.NETNS:
        return Mode.NETNS, "as asked" if reason is None else reason
    if reason is None:
        return Mode.NETNS, "root and network namespaces work here"
    return Mode.UDP, f"network namespaces unavailable ({reason})"


def _fmt_size(n_bytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n_bytes < 1024 or unit == "GB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024
    return f"{n_bytes} B"


class _Progress:
    """One line rewritten in place on a terminal; occasional plain lines otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last_pct = -25  # the first tick always prints

    def __call__(self, job: RunningJob) -> None:
        frac = job.progress()
        pct = int(frac * 100)
        if not self.tty and pct < self.last_pct + 25 and not (pct == 100 != self.last_pct):
            return
        self.last_pct = pct
        bar = "#" * (pct // 4) + "." * (25 - pct // 4)
        line = (f"  job {job.job_id} [{bar}] {pct:3d}%  "
                f"{job.elapsed():5.1f}s  ({job.expected_contributions} contributions)")
        self.stream.write(("\r" + line) if self.tty else (line + "\n"))
        self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


COLUMNS = ("worker", "correct", "max error", "err/bound", "goodput", "packets", "retx",
           "p50 ms", "p99 ms")


def _row(w: WorkerOutcome) -> tuple[str, ...]:
    def f(v: float, spec: str) -> str:
        return "-" if math.isnan(v) else format(v, spec)
    return (str(w.rank), "yes" if w.ok else "NO", f(w.max_error, ".3g"),
            f(w.error_ratio, ".4f"), "-" if math.isnan(w.goodput) else f"{w.goodput / 1e6:.3f} M/s",
            str(w.packets_sent), str(w.retransmissions), f(w.latency_p50_ms, ".2f"),
            f(w.latency_p99_ms, ".2f"))


def format_table(out: JobOutcome) -> str:
    rows = [COLUMNS] + [_row(w) for w in out.workers]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.rjust(wd) for c, wd in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * wd for wd in widths))
    return "\n".join(lines)


def write_csv(out: JobOutcome, path: Path) -> None:
    names = [f.name for f in fields(WorkerOutcome)]
    with open(path, "w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["job", *names])
        for w in out.workers:
            wr.writerow([out.job_id, *[getattr(w, n) for n in names]])


def write_png(out: JobOutcome, path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")  # no display needed; must precede pyplot
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ranks = [w.rank for w in out.workers]
    goodput = [0.0 if math.isnan(w.goodput) else w.goodput / 1e6 for w in out.workers]
    ax1.bar(ranks, goodput, color=["tab:blue" if w.ok else "tab:red" for w in out.workers])
    ax1.set_xlabel("worker")
    ax1.set_ylabel("goodput (M elements/s)")
    ax1.set_xticks(ranks)
    ax1.set_title("per-worker goodput")
    for w in out.workers:
        ax2.plot([w.latency_p50_ms, w.latency_p99_ms], [w.rank, w.rank], "o-", color="tab:blue")
    ax2.set_xlabel("chunk latency (ms): p50 to p99")
    ax2.set_ylabel("worker")
    ax2.set_yticks(ranks)
    ax2.set_title("chunk latency")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _available_memory() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_memory(workers: int, elements: int) -> None:
    """Refuse up front a size that cannot fit: this process holds every rank's float32 input
    while it writes them out, then the float64 reference sum; each worker holds about its
    tensor, its result and the quantized copy."""
    need = elements * (4 * workers + 8) + workers * elements * 12
    have = _available_memory()
    if have is not None and need > have:
        raise RigError(f"{workers} workers x {_fmt_size(4 * elements)} needs about "
                       f"{_fmt_size(need)} of memory but {_fmt_size(have)} is available; "
                       "use a smaller --size or fewer --workers")


def run_demo(opts: DemoOptions, stream: TextIO = sys.stdout) -> int:
    """Run the demo; 0 when every worker's result is correct, 1 otherwise."""
    def say(msg: str) -> None:
        print(msg, file=stream, flush=True)

    check_memory(opts.workers, opts.elements)

    mode, why = choose_mode(opts.mode, opts.leaves)
    # Built before anything is printed or made: bad options fail first, in one line.
    cfg = RigConfig(opts.out / "run", workers=opts.workers, k=opts.k, mode=mode,
                    target=opts.target, loss=opts.loss, slots=opts.slots, timeout=opts.timeout,
                    leaves=opts.leaves)
    opts.out.mkdir(parents=True, exist_ok=True)
    nbytes = 4 * opts.elements
    say(f"netsum demo: {opts.workers} workers all-reduce {opts.elements} float32 "
        f"({_fmt_size(nbytes)}) each through the {opts.target.value} switch, K={opts.k}"
        + (f", {opts.loss:.0%} injected loss" if opts.loss else ""))
    say(f"mode: {mode.value} ({why})")
    progress = _Progress(stream)
    with Rig(cfg, say) as rig:
        ports = ("UDP-tunnel ports on 127.0.0.1" if mode is Mode.UDP
                 else "veth ports, workers in namespaces")
        what = "switch" if not opts.leaves else f"root and {opts.leaves} leaf switches"
        say(f"{what} up ({ports}); pipeline, forwarding and job installed by the controller; "
            f"topology {rig.topology_path}")
        inputs = synthetic_inputs(opts.workers, (opts.elements,), opts.seed)
        job = rig.start_job(inputs)
        del inputs  # on disk for the workers now; can be hundreds of MB
        try:
            outcome = rig.wait_job(job, on_tick=progress)
            progress(job)  # the final state, read while the switch is still up
        finally:
            progress.finish()
    say("")
    say(format_table(outcome))
    say("")
    total = sum(0.0 if math.isnan(w.goodput) else w.goodput for w in outcome.workers)
    slowest = max((w.elapsed_s for w in outcome.workers if not math.isnan(w.elapsed_s)),
                  default=float("nan"))
    say(f"job {outcome.job_id}: {outcome.elements} elements in {slowest:.2f} s (slowest "
        f"worker); mean goodput {total / len(outcome.workers) / 1e6:.3f} M elements/s; switch "
        f"counters: " + ", ".join(f"{k} {v}" for k, v in outcome.switch_counters.items() if v))
    if outcome.fallback:
        say(f"ran on the host fallback (ring all-reduce), not the switch: {outcome.fallback}")
    say("switch health (every figure must be 0: faults, and packets the switch refused):")
    say(outcome.health)
    csv_path, png_path = opts.out / "results.csv", opts.out / "allreduce.png"
    write_csv(outcome, csv_path)
    write_png(outcome, png_path,
              f"netsum: {opts.workers} workers, {_fmt_size(nbytes)}, K={opts.k}, {mode.value}"
              + (f", loss {opts.loss:.0%}" if opts.loss else ""))
    say(f"wrote {csv_path} and {png_path}")
    if outcome.ok:
        say("all results correct (within the quantization bound of docs/quantization.md), "
            "no switch faults or refusals")
        return 0
    for w in outcome.workers:
        if not w.ok:
            say(f"worker {w.rank} FAILED: {w.error}")
    for problem in outcome.problems:
        say(f"FAILED: {problem}")
    return 1
