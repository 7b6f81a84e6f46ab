"""Where one call's per-value work goes: the compiled core's set-up, its run and result(),
for checkouts side by side in one run.

    .venv/bin/python benchmarks/core_phases.py [--trees DIR,DIR] [--sizes 1,1048576,16777216]
                                               [--k 256,1024] [--rounds 3] [--out] [--predict]

In-process, no sockets: one `NativeCore` of a 4-worker job (the scale shift of 4 ranks)
against an echo that turns each DATA into its RESULT, results handed over in batches of 64
through the frames API.  Per call: `init` (the constructor: plan, proposals and the
finiteness check, the window's rows, the result's buffers), `run` (start and every batch:
acceptance, the values into the output, the launches with their quantization -- plus the
echo's Python, the same for every tree) and `result()`.  `--out` gives each call one
preallocated output (`write_into`, where the tree has it).  `--predict`: each tree also
with speculative exponents (docs/quantization.md; where the tree has them), every call
predicting the maxima of one call before it (all hits: no bootstrap, one packet per block),
in the same alternation.  `run ns/pkt` is `run` over the packets the call sent.  Each tree
runs in its own
process with PYTHONPATH=DIR, the trees alternately, `--rounds` times; the best call of each
round, then the median over rounds.  The load average is printed (the machine is shared).
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


def measure(size: int, k: int, reps: int, out: bool, predict: bool
            ) -> tuple[float, float, float, int]:
    """(init, run, result) seconds of the best of `reps` calls, and the packets one sent."""
    import numpy as np

    from netsum.workers.core import CoreState, JobConfig, Timing
    from netsum.workers.native import NativeCore
    x = np.random.default_rng(1).standard_normal(size).astype(np.float32)
    job = JobConfig(job_id=1, num_workers=4, num_slots=256, k=k)
    timing = Timing(rto_initial=5.0, rto_min=5.0, rto_max=10.0, progress_deadline=60.0)
    dst = np.empty(size, np.float32)
    best: tuple[float, float, float] | None = None
    kw: dict[str, object] = {}
    for _ in range(reps + predict):
        t0 = time.perf_counter()
        core = NativeCore(x, job, timing, **kw)
        if out and hasattr(core, "write_into"):
            core.write_into(dst)
        t1 = time.perf_counter()
        frames, size_b = core.frames, core.packet_bytes
        hr = len(frames[0]) - size_b

        def echo(sent: list[int]) -> list[memoryview]:
            replies = []
            for i in sent:
                b = bytearray(frames[i][hr:])
                b[0] = 2                       # RESULT: a one-contribution sum
                replies.append(memoryview(b))
            return replies
        batch = echo(core.start_frames(0.0))
        while core.state is CoreState.RUNNING:
            nxt: list[memoryview] = []
            for j in range(0, len(batch), 64):
                part = batch[j:j + 64]
                nxt += echo(core.receive_frames(part, len(part), 0.001))
            batch = nxt
        t2 = time.perf_counter()
        core.result()
        t3 = time.perf_counter()
        if predict and not kw:          # the first call: its maxima, the predictions
            kw = {"predict": core.result().maxima}
            continue
        got = (t1 - t0, t2 - t1, t3 - t2)
        best = got if best is None or sum(got) < sum(best) else best
    assert best is not None
    return (*best, core.stats().packets_sent)


def child(args: argparse.Namespace) -> None:
    if args.predict:
        import inspect

        from netsum.workers.core import WorkerCore
        if "predict" not in inspect.signature(WorkerCore).parameters:
            print(json.dumps({}))            # a tree without speculative exponents
            return
    rows = {f"{s},{k}": measure(s, k, 3 if s < 1 << 22 else 2, args.out, args.predict)
            for s in args.sizes for k in args.k}
    print(json.dumps(rows))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", default=str(ROOT), help="checkouts, comma-separated")
    ap.add_argument("--sizes", default="1,1048576,16777216")
    ap.add_argument("--k", default="256,1024")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", action="store_true", help="a preallocated output per call")
    ap.add_argument("--predict", action="store_true",
                    help="speculative exponents, predicting the previous call's maxima")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.k = [int(k) for k in args.k.split(",")]
    if args.child:
        child(args)
        return 0
    trees = [str(Path(t).resolve()) for t in args.trees.split(",")]
    # (tree, speculative) pairs, run alternately
    runners = [(t, p) for t in trees for p in ((False, True) if args.predict else (False,))]
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    runs: dict[tuple[str, bool], list[dict[str, list[float]]]] = {t: [] for t in runners}
    for r in range(args.rounds):
        for tree, spec in (runners if r % 2 == 0 else runners[::-1]):
            cmd = [sys.executable, __file__, "--child", "--sizes",
                   ",".join(map(str, args.sizes)), "--k", ",".join(map(str, args.k))]
            if args.out:
                cmd.append("--out")
            if spec:
                cmd.append("--predict")
            env = dict(os.environ, PYTHONPATH=tree)
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True,
                                 cwd="/")
            runs[tree, spec].append(json.loads(res.stdout.strip().splitlines()[-1]))
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'tree':<28} {'size':>9} {'K':>5} {'init ms':>9} {'run ms':>9} {'result ms':>10} "
          f"{'ns/value':>9} {'packets':>8} {'run ns/pkt':>10}")
    for s in args.sizes:
        for k in args.k:
            for tree, spec in runners:
                name = tree[-28 + 8 * spec:] + (" predict" if spec else "")
                got = runs[tree, spec]
                if not got[0]:
                    continue                      # a tree without speculative exponents
                ph = [statistics.median(r[f"{s},{k}"][i] for r in got) for i in range(3)]
                pkts = int(got[0][f"{s},{k}"][3])
                print(f"{name:<28} {s:>9} {k:>5} {ph[0] * 1e3:9.2f} {ph[1] * 1e3:9.2f} "
                      f"{ph[2] * 1e3:10.2f} {sum(ph) / s * 1e9:9.1f} {pkts:>8} "
                      f"{ph[1] / pkts * 1e9:10.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
