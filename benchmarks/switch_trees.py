"""Two versions of the switch side by side: `switch_pps.py` of each, alternately, in one run.

    python benchmarks/switch_trees.py BEFORE [AFTER] [--rounds 5] [--seconds 0.5] [--no-udp]

BEFORE and AFTER are checkouts (directories) or commits of this repository (extracted with
`git archive` into a temporary directory); AFTER defaults to this checkout.  Each round runs
`benchmarks/switch_pps.py` of both (each with its own tree first on the import path, so each
measures its own switch), BEFORE first in odd rounds and AFTER first in even ones (the second
run of a pair is systematically favoured on a loaded machine), and the table gives per
measurement the median pkt/s of each and the ratio AFTER / BEFORE.  The machine is shared and
noisy: only ratios of medians taken in one run mean anything; `BEFORE BEFORE` (the same
version twice) shows how far from 1.0 the noise alone goes.
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default=str(ROOT))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--no-udp", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="switch-trees-") as tmp:
        trees = [tree(a.before, Path(tmp)), tree(a.after, Path(tmp))]
        runs: list[list[dict[str, float]]] = [[], []]
        for r in range(a.rounds):
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                runs[i].append(run_once(trees[i], a.seconds, not a.no_udp))
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    labels = [k for k in runs[0][0] if all(k in x for side in runs for x in side)]
    print(f"before = {a.before}, after = {a.after}; {a.rounds} alternating rounds, "
          f"{a.seconds}s per measurement; medians, and the best run of each (other work on "
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
