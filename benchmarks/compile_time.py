"""Compile time of netsum's P4 programs with netsum-p4c, per pass, against the 2 s goal.

    .venv/bin/python benchmarks/compile_time.py [--repeat N]

Prints, for p4/netsum.p4 at every K up to 256 (--k 1024,... for more) and for the two p4c
fixtures, the median wall time of each pipeline pass and of the whole compile, and the ratio
goal/time measured in this run (> 1 means faster than the goal).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from netsum.p4c.driver import PIPELINE, CompileState
from netsum.wire import K_HARDWARE_MAX, K_SUPPORTED

GOAL_S = 2.0


def run_once(path: Path, defines: dict[str, str | None]) -> dict[str, float]:
    state = CompileState(path.read_text(), str(path), (), defines)
    times: dict[str, float] = {}
    for name, step in PIPELINE:
        t0 = time.perf_counter()
        step(state)
        times[name] = time.perf_counter() - t0
        state.diags.check()
    times["total"] = sum(times.values())
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--k", default=",".join(str(k) for k in K_SUPPORTED if k <= K_HARDWARE_MAX),
                    help="netsum.p4's K, a comma list (default: every K up to 256; 512-2048 "
                         "take 3-36 s a compile)")
    args = ap.parse_args()
    fixtures = ROOT / "tests" / "fixtures" / "p4c"
    targets: list[tuple[str, Path, dict[str, str | None]]] = [
        *((f"netsum.p4 K={k}", ROOT / "p4" / "netsum.p4", {"NETSUM_K": str(k)})
          for k in (int(x) for x in args.k.split(",") if x)),
    ]
    for name in ("l2_mcast", "calc_state"):
        if (fixtures / f"{name}.p4").exists():
            targets.append((f"{name}.p4", fixtures / f"{name}.p4", {}))
    names = [n for n, _ in PIPELINE] + ["total"]
    header = f"{'program':<18}" + "".join(f"{n[:12]:>13}" for n in names) + f"{'goal/total':>12}"
    print(header)
    for label, path, defines in targets:
        runs = [run_once(path, defines) for _ in range(args.repeat)]
        med = {n: statistics.median(r[n] for r in runs) for n in names}
        row = f"{label:<18}" + "".join(f"{med[n] * 1000:>11.1f}ms" for n in names)
        print(row + f"{GOAL_S / med['total']:>11.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
