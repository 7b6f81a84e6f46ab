"""Two versions of the workers side by side: CPU per contribution and all-reduce goodput, in one run.

    python benchmarks/worker_trees.py BEFORE [AFTER] [--rounds 3] [--k 256] [--blocks 4000]
                                      [--workers 4] [--elements 1048576] [--no-allreduce]

BEFORE and AFTER are checkouts (directories) or commits (extracted with `git archive`, as
benchmarks/switch_trees.py does); AFTER defaults to this checkout.  Compare a commit with its
parent (or main with a branch on it) so that only the workers differ.  Each round measures both,
BEFORE first in odd rounds and AFTER first in even ones (the second of a pair is favoured on a
loaded machine):
  * this checkout's `benchmarks/worker_core.py` run on each version's workers (PYTHONPATH):
    one worker's allreduce() CPU per packet over a FrameTransport and a UdpTransport against
    an echo process, next to a bare send/recv loop over the same sockets, and the in-process
    core against an in-process echo;
  * each version's `benchmarks/allreduce.py` (PYTHONPATH: its switch, controller and worker
    processes): goodput of a --workers all-reduce at K=--k over UDP ports, the bare-loop
    ceiling, and the switch's and workers' CPU per contribution (worker start-up included).
The table gives the median of each side, AFTER / BEFORE, and the same for the best run of each
(other work only slows a run down).  The machine is shared and noisy:
only ratios measured in one run mean anything.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from switch_trees import tree

_CORE = re.compile(r"^K=\s*\d+ in-process: bare [^|]*?([\d.]+) \| WorkerCore Step API\s+([\d.]+)"
                   r"[^|]*(?:\| frames API\s+([\d.]+))?")
_LOOP = re.compile(r"^K=\s*\d+ socket loop, (\w+)\s*: allreduce\(\)\s+([\d.]+) \| bare send/recv "
                   r"loop\s+([\d.]+)")
# allreduce.py's rows; trees since the native switch path lead with the path's name
_ALL = re.compile(r"^\s*(?:native\s+|python\s+)?udp\s+(\d+)\s+(\d+)\s+([\d.]+) M/s\s+([\d.]+) M/s\s+(\d+)\s+([\d,]+)\s+"
                  r"([\d.]+) M/s\s+([\d.]+)\s+(\d+) %\s+(\d+) %\s+([\d.]+)\s+([\d.]+)\s+(\w+)")


def _run(argv: list[str], where: Path, env: dict[str, str]) -> str:
    res = subprocess.run(argv, cwd=where, env=dict(os.environ, **env), capture_output=True,
                         text=True, timeout=900)
    if res.returncode:
        raise SystemExit(f"worker_trees: {where}: {' '.join(argv[1:2])} failed:\n"
                         f"{res.stdout[-1500:]}\n{res.stderr[-1500:]}")
    return res.stdout


def measure(where: Path, a: argparse.Namespace) -> dict[str, float]:
    got: dict[str, float] = {}
    out = _run([sys.executable, str(ROOT / "benchmarks" / "worker_core.py"), "--k", str(a.k),
                "--blocks", str(a.blocks), "--repeat", "1"], where,
               {"PYTHONPATH": str(where)})
    for line in out.splitlines():
        if m := _CORE.match(line):
            got["in-process: Step API"] = float(m.group(2))
            if m.group(3):
                got["in-process: frames API (allreduce's path)"] = float(m.group(3))
        elif m := _LOOP.match(line):
            got[f"allreduce() over {m.group(1)}"] = float(m.group(2))
            got[f"bare send/recv loop, {m.group(1)}"] = float(m.group(3))
    if not a.no_allreduce:
        out = _run([sys.executable, str(where / "benchmarks" / "allreduce.py"), "--workers",
                    str(a.workers), "--k", str(a.k), "--mode", "udp", "--repeat", "1",
                    "--elements", str(a.elements), "--seconds", "1"], where,
                   {"PYTHONPATH": str(where)})
        for line in out.splitlines():
            if m := _ALL.match(line):
                got["e2e goodput (M elements/s)"] = float(m.group(3))
                got["e2e bare-loop ceiling (M elements/s)"] = float(m.group(7))
                got["e2e goodput / ceiling"] = float(m.group(8))
                got["e2e switch CPU us per contribution"] = float(m.group(11))
                got["e2e worker CPU us per packet (start-up incl.)"] = float(m.group(12))
                got["e2e retransmissions"] = float(m.group(5))
                if m.group(13) != "yes":
                    raise SystemExit(f"worker_trees: {where}: the all-reduce's check failed")
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default=str(ROOT))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--blocks", type=int, default=4000, help="packets per worker_core.py run")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--elements", type=int, default=1 << 20)
    ap.add_argument("--no-allreduce", action="store_true", help="skip allreduce.py")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="worker-trees-") as tmp:
        trees = [tree(a.before, Path(tmp)), tree(a.after, Path(tmp))]
        runs: list[list[dict[str, float]]] = [[], []]
        for r in range(a.rounds):
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                runs[i].append(measure(trees[i], a))
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    labels = list(dict.fromkeys(k for side in runs for x in side for k in x))
    print(f"before = {a.before}, after = {a.after}; K={a.k}; {a.rounds} alternating rounds, "
          f"medians; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          "CPU figures in us per packet")
    # Other work on the machine only slows a run down: the best run of each side (the highest
    # rate, the least CPU) is the other figure to compare.
    print(f"{'measurement':<48} {'before':>9} {'after':>9} {'ratio':>6}   {'best before':>11} "
          f"{'best after':>10} {'ratio':>6}")
    for key in labels:
        sides = [[x[key] for x in side if key in x] for side in runs]
        best = max if "M elements/s" in key or "/ ceiling" in key else min
        cells, ratios = [], []
        for pick in (statistics.median, best):
            got = [pick(v) if v else float("nan") for v in sides]
            cells.append([f"{g:9.3f}" if v else f"{'-':>9}" for g, v in zip(got, sides)])
            ratios.append(got[1] / got[0] if sides[0] and sides[1] and got[0] else float("nan"))
        print(f"{key:<48} {cells[0][0]} {cells[0][1]} {ratios[0]:6.2f}   {cells[1][0]:>11} "
              f"{cells[1][1]:>10} {ratios[1]:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
