"""The native switch's CPU per packet and per value on netsum.p4, this tree against another.

    python benchmarks/switch_lanes.py [--k 256,1024] [--rounds 5] [--seconds 0.5]
                                      [--baseline /path/to/other/netsum/tree]

Each (tree, K) gets a child process that loads netsum.p4 as the daemon does (two jobs of four
workers, benchmarks/pps_traffic.netsum_traffic) with the native backend built at load, then
runs the contribution stream straight through the native module's `process` (no Device, no
sockets: the pipeline and the Python call only) for `--seconds` of its own CPU time per
round.  The children take turns, round after round, so a busy machine loads them alike;
medians of CPU µs per packet, ns per value (per packet / K) and the ratio to the baseline are
printed.  Without --baseline only this tree is measured.  A baseline tree is any netsum
source tree (`git archive <commit> | tar -x -C DIR`); its own generator builds its module.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _measure(tree: Path, k: int) -> None:
    """Child: load, then answer each `go SECONDS` line with one JSON result line."""
    for sub in ("tests", "benchmarks"):
        sys.path.insert(0, str(tree / sub))
    sys.path.insert(0, str(tree))
    from pps_traffic import netsum_traffic   # noqa: E402 - from the tree measured

    got = netsum_traffic(k, 4, True, True)
    assert got is not None, "netsum.p4 not built"
    dev, frames = got
    pl = dev.pipeline
    assert pl is not None and pl.native is not None, pl and pl.native_status
    run = pl.native
    proc, ctx = run.process, run.ctx
    if run.dirty:
        run.flush()
    out: list[object] = []
    for p, f in frames:                       # warm: every slot's rounds under way
        proc(ctx, p, f, 0, out)
    print(json.dumps({"ready": True, "module": pl.native_status}), flush=True)
    for line in sys.stdin:
        secs = float(line.split()[1])
        n, outs = 0, 0
        c0 = time.process_time()
        while time.process_time() - c0 < secs:
            for p, f in frames:
                out = []
                proc(ctx, p, f, 0, out)
                outs += len(out)
            n += len(frames)
        cpu = time.process_time() - c0
        print(json.dumps({"us_per_packet": cpu / n * 1e6, "outputs_per_packet": outs / n}),
              flush=True)
    assert dev.stats.internal_errors == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="256,1024")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--baseline", type=Path, default=None)
    ap.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.measure:
        _measure(Path(a.measure[0]), int(a.measure[1]))
        return 0
    ks = [int(x) for x in a.k.split(",")]
    trees = [("this", ROOT)] + ([("baseline", a.baseline.resolve())] if a.baseline else [])
    kids: dict[tuple[str, int], subprocess.Popen[str]] = {}
    for name, tree in trees:
        for k in ks:
            env = dict(os.environ, PYTHONPATH=str(tree))
            kids[(name, k)] = subprocess.Popen(
                [sys.executable, __file__, "--measure", str(tree), str(k)], env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(tree))
    for key, p in kids.items():               # loads (and builds) before any timing
        assert p.stdout is not None
        ready = json.loads(p.stdout.readline())
        print(f"{key[0]} K={key[1]}: {ready['module']}", flush=True)
    res: dict[tuple[str, int], list[float]] = {key: [] for key in kids}
    load = []
    for _ in range(a.rounds):
        load.append(os.getloadavg()[0])
        for key, p in kids.items():
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(f"go {a.seconds}\n")
            p.stdin.flush()
            res[key].append(json.loads(p.stdout.readline())["us_per_packet"])
    for p in kids.values():
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    print(f"\nload average (1 min) during the rounds: {min(load):.1f}-{max(load):.1f}; "
          f"medians of {a.rounds} rounds of {a.seconds} s CPU each")
    head = "| K | tree | µs per packet | ns per value |" + \
        (" baseline / this |" if a.baseline else "")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for k in ks:
        this = statistics.median(res[("this", k)])
        for name, _t in trees:
            m = statistics.median(res[(name, k)])
            ratio = f" {m / this:.2f}x |" if a.baseline else ""
            print(f"| {k} | {name} | {m:.2f} | {m / k * 1000:.2f} |{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
