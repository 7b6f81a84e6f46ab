"""Two versions of the switch side by side: `switch_pps.py` of each, alternately, in one run.

    python benchmarks/switch_trees.py BEFORE [AFTER] [--rounds 5] [--seconds 0.5] [--no-udp]
                                      [--cpu [--packets N]]

BEFORE and AFTER are checkouts (directories) or commits of this repository (extracted with
`git archive` into a temporary directory); AFTER defaults to this checkout.  Each round runs
`benchmarks/switch_pps.py` of both (each with its own tree first on the import path, so each
measures its own switch), BEFORE first in odd rounds and AFTER first in even ones (the second
run of a pair is systematically favoured on a loaded machine), and the table gives per
measurement the median pkt/s of each and the ratio AFTER / BEFORE.  The machine is shared and
noisy: only ratios of medians taken in one run mean anything; `BEFORE BEFORE` (the same
version twice) shows how far from 1.0 the noise alone goes.

`--cpu` measures instead the CPU time of the packet path itself (`time.thread_time()` around N
`Device.process` calls of the router and of the stand-in aggregation program of each version's
switch_pps.py, in-process): time the process spends waiting for a core does not count, so a
loaded machine disturbs it far less than pkt/s.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LINE = re.compile(r"^\s+(in-process|udp ports|veth)\s+(.+?)\s+([\d,]+) pkt/s in")


def tree(spec: str, tmp: Path) -> Path:
    """A directory holding version `spec` (a directory as given, or a commit extracted)."""
    p = Path(spec)
    if p.is_dir():
        return p.resolve()
    out = tmp / re.sub(r"[^\w.-]", "_", spec)
    if out.exists():                       # the same commit on both sides
        return out
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", spec], check=True,
                             capture_output=True).stdout
    tar = tmp / "a.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(out, filter="data")
    return out


def run_once(where: Path, seconds: float, udp: bool) -> dict[str, float]:
    argv = [sys.executable, str(where / "benchmarks" / "switch_pps.py"), "--seconds",
            str(seconds)] + ([] if udp else ["--no-udp"])
    env = dict(os.environ, PYTHONPATH=str(where))
    res = subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True,
                         timeout=600)
    if res.returncode:
        raise SystemExit(f"switch_trees: {where}: switch_pps.py failed:\n{res.stderr[-2000:]}")
    got = {}
    for line in res.stdout.splitlines():
        m = _LINE.match(line)
        if m:
            got[f"{m.group(1)}: {m.group(2)}"] = float(m.group(3).replace(",", ""))
    return got


_CPU = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("pps", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
n = int(sys.argv[2])
for kind in ("router", "agg"):
    dev = m.make_device(kind, 32, 4, None)
    frame = m.router_frame() if kind == "router" else m.agg_frame(32)
    for _ in range(200):
        dev.process(1, frame)
    t0 = time.thread_time()
    for _ in range(n):
        dev.process(1, frame)
    print(kind, n / (time.thread_time() - t0))
"""


def run_cpu(where: Path, packets: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(where))
    res = subprocess.run([sys.executable, "-c", _CPU, str(where / "benchmarks" / "switch_pps.py"),
                          str(packets)], cwd=where, env=env, capture_output=True, text=True,
                         timeout=600)
    if res.returncode:
        raise SystemExit(f"switch_trees: {where}: {res.stderr[-2000:]}")
    names = {"router": "cpu: ipv4 router", "agg": "cpu: aggregation (stand-in, K=32)"}
    return {names[k]: float(v) for k, v in (line.split() for line in res.stdout.splitlines())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default=str(ROOT))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--no-udp", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="CPU time per packet, not pkt/s")
    ap.add_argument("--packets", type=int, default=20000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="switch-trees-") as tmp:
        trees = [tree(a.before, Path(tmp)), tree(a.after, Path(tmp))]
        runs: list[list[dict[str, float]]] = [[], []]
        for r in range(a.rounds):
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                runs[i].append(run_cpu(trees[i], a.packets) if a.cpu else
                               run_once(trees[i], a.seconds, not a.no_udp))
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    labels = [k for k in runs[0][0] if all(k in x for side in runs for x in side)]
    print(f"before = {a.before}, after = {a.after}; {a.rounds} alternating rounds, "
          f"{f'{a.packets} packets (CPU time)' if a.cpu else f'{a.seconds}s'} per measurement; "
          "medians, and the best run of each (other work on "
          "the machine only ever slows a run down, so the best is the steadier estimate)")
    print(f"| {'measurement':48s} | before | after | ratio | best before | best after | ratio |")
    print(f"|{'-' * 50}|-------:|------:|------:|------------:|-----------:|------:|")
    for k in labels:
        b = statistics.median(x[k] for x in runs[0])
        f = statistics.median(x[k] for x in runs[1])
        bb, bf = max(x[k] for x in runs[0]), max(x[k] for x in runs[1])
        print(f"| {k:48s} | {b:6,.0f} | {f:5,.0f} | {f / b:5.3f} | {bb:11,.0f} | {bf:10,.0f} | "
              f"{bf / bb:5.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
