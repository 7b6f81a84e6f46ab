"""Soak: at least --packets aggregation packets through one netsum-switch daemon, as several
4-worker jobs back to back, every link losing, duplicating and reordering datagrams, with the
switch's memory and the chunk latency sampled all along.

    python tests/soak.py [--packets 1000000] [--blocks 20000] [--loss 0.05] [--dup 0.02]
                              [--window 16] [--out results/soak] [--seed 1]

The network is tests/impair.py's relay on real sockets (each direction of each link: `loss`
dropped, `dup` sent twice, each datagram overtaken by up to window - 1 later ones); jobs are
new registrations of one job (netsum-ctl job reset) on the same slots; every RESULT the
switch sends is checked against the integer sums the inputs give and every worker's output
bit for bit (tests/hostile.py, tests/exactsums.py).  "packets": DATA datagrams the workers
sent (first sends and retransmissions) -- what the switch aggregated or refused.

Prints one row per job (packets, retransmission rate, relay losses and duplicates, chunk
latency p50/p99, switch RSS) and the verdict: zero wrong RESULTs and outputs, switch RSS after
the first job (warm-up) within 10 % of its post-warm-up minimum, internal_errors 0.  Writes
soak.csv (RSS samples) and soak.png (RSS over time, job boundaries marked) to --out.  Exit
status 0 only when every check passed.
"""
from __future__ import annotations

import argparse
import csv
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from helpers import assert_switch_clean
from hostile import HostileSwitch, Impairment
from netsum.procs import ProcessGroup

ROOT = Path(__file__).resolve().parents[1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@dataclass
class Sampler:
    """The switch's RSS every `every` seconds, in a thread."""
    pid: int
    every: float = 0.5

    def __post_init__(self) -> None:
        self.samples: list[tuple[float, int]] = []
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.samples.append((time.monotonic() - self.t0, rss_kib(self.pid)))
            except OSError:
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def write_png(samples: list[tuple[float, int]], bounds: list[float], packets: list[int],
              path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot([t for t, _ in samples], [r / 1024 for _, r in samples], color="tab:blue",
            label="switch RSS")
    for i, b in enumerate(bounds):
        ax.axvline(b, color="grey", lw=0.6, ls=":", label="job ends" if i == 0 else None)
    if bounds:
        ax.axvspan(0, bounds[0], color="tab:orange", alpha=0.1, label="warm-up (job 1)")
    ax.set_xlabel("seconds")
    ax.set_ylabel("RSS (MiB)")
    top = max(r for _, r in samples) / 1024
    ax.set_ylim(0, top * 1.15)
    ax2 = ax.twinx()
    ax2.plot([0.0, *bounds], [0, *packets], "s-", color="tab:green", ms=3,
             label="aggregation packets (cumulative)")
    ax2.set_ylabel("packets")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="lower right", fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--blocks", type=int, default=20_000, help="blocks per worker per job")
    ap.add_argument("--loss", type=float, default=0.05)
    ap.add_argument("--dup", type=float, default=0.02)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "soak")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    impair = Impairment(a.loss, a.dup, a.window)
    print(f"soak: >= {a.packets} packets, {a.blocks} blocks per worker per job, loss "
          f"{a.loss:.0%} dup {a.dup:.0%} reorder window {a.window}, seed {a.seed}", flush=True)
    head = (f"{'job':>3} {'packets':>9} {'total':>9} {'retx %':>7} {'lost':>7} {'dup':>6} "
            f"{'p50 ms':>7} {'p99 ms':>7} {'RSS MiB':>8} {'s':>6}  exact")
    bad: list[str] = []
    bounds: list[float] = []
    cumulative: list[int] = []
    rss_at_end: list[int] = []
    total = 0
    with tempfile.TemporaryDirectory(prefix="netsum-soak-") as tmp, \
            ProcessGroup(Path(tmp) / "logs") as procs:
        sw = HostileSwitch(Path(tmp), procs)
        sw.start()
        sampler = Sampler(sw.switch.popen.pid)
        print(head, flush=True)
        job = 0
        while total < a.packets:
            job += 1
            run = sw.run_job(a.blocks, seed=a.seed * 1000 + job, impair=impair,
                             worker_timeout=60)
            sent = sum(int(w["packets_sent"]) for w in run.workers)  # type: ignore[call-overload]
            retx = sum(int(w["retransmissions"]) for w in run.workers)  # type: ignore[call-overload]
            p50 = max(float(w["chunk_latency_p50_ms"]) for w in run.workers)  # type: ignore[arg-type]
            p99 = max(float(w["chunk_latency_p99_ms"]) for w in run.workers)  # type: ignore[arg-type]
            total += sent
            rss = rss_kib(sw.switch.popen.pid)
            bounds.append(time.monotonic() - sampler.t0)
            cumulative.append(total)
            rss_at_end.append(rss)
            ok = run.outputs_exact and not run.check.bad
            if not ok:
                bad.append(f"job {job}: outputs exact {run.outputs_exact}, wrong RESULTs "
                           f"{run.check.bad[:3]}, exit codes {run.returncodes}")
            print(f"{job:>3} {sent:>9} {total:>9} {100 * retx / max(1, sent):>7.2f} "
                  f"{run.relay['lost']:>7} {run.relay['duplicated']:>6} {p50:>7.2f} "
                  f"{p99:>7.2f} {rss / 1024:>8.1f} {run.seconds:>6.1f}  {'yes' if ok else 'NO'}",
                  flush=True)
        sampler.stop()
        try:
            assert_switch_clean(sw.daemon.grpc_addr)
        except AssertionError as exc:
            bad.append(str(exc))
    after = [r for t, r in sampler.samples if bounds and t > bounds[0]]
    growth = (max(after) / min(after) - 1) if after else float("nan")
    with (a.out / "soak.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["seconds", "rss_kib"])
        w.writerows((f"{t:.2f}", r) for t, r in sampler.samples)
    write_png(sampler.samples, bounds, cumulative, a.out / "soak.png",
              f"netsum-switch RSS, {total:,} packets in {job} jobs (loss {a.loss:.0%}, dup "
              f"{a.dup:.0%}, reorder {a.window})")
    print(f"\n{total} packets in {job} jobs, {bounds[-1]:.0f} s; switch RSS after warm-up "
          f"{min(after) / 1024:.1f}..{max(after) / 1024:.1f} MiB (max/min - 1 = "
          f"{100 * growth:.1f} %, goal <= 10 %); RSS at each job's end (MiB): "
          f"{', '.join(f'{r / 1024:.1f}' for r in rss_at_end)}" if after else
          f"\n{total} packets in {job} job(s): too short for an RSS figure after warm-up")
    print(f"wrote {a.out / 'soak.csv'} and {a.out / 'soak.png'}")
    if after and growth > 0.10:
        bad.append(f"switch RSS grew {100 * growth:.1f} % after warm-up (goal <= 10 %)")
    for line in bad:
        print(f"FAILED: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
