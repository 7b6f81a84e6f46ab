"""The Python worker core's cost per packet in instructions executed, two versions side by side:
a figure the machine's load does not move (the shared machine's CPU times move by 15 % and more).

    python benchmarks/worker_instructions.py BEFORE [AFTER] [--k 32,256] [--blocks 2000]
                                             [--native]

BEFORE and AFTER are checkouts or commits (as benchmarks/switch_trees.py takes them; AFTER
defaults to this checkout).  For each version, K and face (the frames API, the Step API), one
worker of a one-worker job runs against an in-process echo (every DATA turned into its RESULT),
under valgrind's cachegrind without the cache simulation; the count of a run with no call is
taken from that of a run with two, and the rest divided by the packets (blocks + the window's
bootstrap uses).  Single-threaded BLAS and a fixed hash seed make a count repeat to about
0.01 % in one place, but the same code counted from another directory moved by up to 1 %
(paths of other lengths, other allocations): differences below about 1 % are not resolved.
`--native`: the compiled core (`NativeCore`, workers/wcore.c) instead, each tree's module
built before it is counted; its count includes the echo's Python, the same in both trees.
`--after-predict`: AFTER with speculative exponents (docs/quantization.md), each block
predicted right (all hits: no bootstrap, its packets are the blocks alone).
Needs valgrind; slow (about 20 s per count on an idle core).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from switch_trees import tree  # noqa: E402

SLOTS = 256
# Run inside valgrind, with the measured version's netsum first on the path.
CHILD = """
import sys
from collections import deque
import numpy as np
from netsum.wire import MsgType
from netsum.workers import quant, wire
from netsum.workers.core import JobConfig, Timing, WorkerCore
MSG, COUNT = wire.OFFSETS["msg_type"], wire.OFFSETS["count"]
face, k, n, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
native, predict = "native" in sys.argv[5:], "predict" in sys.argv[5:]
if native:         # the module loaded in the run with no call too: not counted
    from netsum.workers.native import NativeCore as WorkerCore, native_module
    native_module()
x = np.random.default_rng(1).standard_normal(n * k).astype(np.float32)
kw = {"predict": quant.block_exponents(x, k)} if predict else {}   # one worker: its maxima
def frames():
    core = WorkerCore(x, JobConfig(1, 1, %d, k), Timing(), **kw)
    rx = [memoryview(bytearray(core.packet_bytes))]
    pending, fr, m = deque(core.start_frames(0.0)), core.frames, 0
    while pending:
        m += 1
        rx[0][:] = fr[pending.popleft()]
        rx[0][MSG], rx[0][COUNT] = MsgType.RESULT, 1
        pending += core.receive_frames(rx, 1, m * 1e-6)
    core.result()
def native_frames():       # the compiled core's rows are reused by its next call: copied
    core = WorkerCore(x, JobConfig(1, 1, %d, k), Timing(), **kw)
    rx = [memoryview(bytearray(core.packet_bytes))]
    fr, m = core.frames, 0
    pending = deque([bytes(fr[i]) for i in core.start_frames(0.0)])
    while pending:
        m += 1
        rx[0][:] = pending.popleft()
        rx[0][MSG], rx[0][COUNT] = MsgType.RESULT, 1
        pending += [bytes(fr[i]) for i in core.receive_frames(rx, 1, m * 1e-6)]
    core.result()
def steps():
    core = WorkerCore(x, JobConfig(1, 1, %d, k), Timing(), **kw)
    pending, m = deque(core.start(0.0).send), 0
    while pending:
        m += 1
        b = bytearray(pending.popleft())
        b[MSG], b[COUNT] = MsgType.RESULT, 1
        pending += core.receive(bytes(b), m * 1e-6).send
    core.result()
for _ in range(calls):
    (native_frames if native else frames)() if face == "frames" else steps()
""" % (SLOTS, SLOTS, SLOTS)
_IR = re.compile(r"I\s+refs:\s+([\d,]+)")


def count(where: Path, face: str, k: int, blocks: int, calls: int, native: bool = False,
          predict: bool = False) -> int:
    env = dict(os.environ, PYTHONPATH=str(where), PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               NETSUM_WORKER_NATIVE="1" if native else "0")
    opts = (["native"] if native else []) + (["predict"] if predict else [])
    child = [sys.executable, "-c", CHILD, face, str(k), str(blocks), str(calls), *opts]
    if native:        # the module built (or found in the cache) outside the count
        subprocess.run(child[:6] + ["0", *opts], cwd=where, env=env, check=True,
                       capture_output=True, timeout=1800)
    res = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                          "--cachegrind-out-file=/dev/null", *child], cwd=where, env=env,
                         capture_output=True, text=True, timeout=1800)
    m = _IR.search(res.stderr)
    if res.returncode or m is None:
        raise SystemExit(f"worker_instructions: {where}: {res.stderr[-1500:]}")
    return int(m.group(1).replace(",", ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default=str(ROOT))
    ap.add_argument("--k", default="32,256", help="values per packet, comma-separated")
    ap.add_argument("--blocks", type=int, default=2000, help="blocks per call")
    ap.add_argument("--native", action="store_true", help="the compiled core (NativeCore)")
    ap.add_argument("--after-predict", action="store_true",
                    help="AFTER with speculative exponents, every prediction right")
    a = ap.parse_args()
    boot = a.blocks + min(SLOTS, a.blocks)
    packets = [boot, a.blocks if a.after_predict else boot]
    rows = []
    with tempfile.TemporaryDirectory(prefix="worker-ir-") as tmp:
        trees = [tree(a.before, Path(tmp)), tree(a.after, Path(tmp))]
        for k in (int(v) for v in a.k.split(",")):
            for face in ("frames", "steps"):
                got = [(count(t, face, k, a.blocks, 2, a.native, p) -
                        count(t, face, k, a.blocks, 0, a.native, p)) // (2 * pk)
                       for t, p, pk in zip(trees, (False, a.after_predict), packets)]
                rows.append((f"{'frames API' if face == 'frames' else 'Step API'}, K={k}", got))
                print(f"{rows[-1][0]} done", file=sys.stderr, flush=True)
    print(f"before = {a.before}, after = {a.after}; instructions per packet (valgrind), "
          f"{a.blocks} blocks, window {SLOTS}, {'compiled' if a.native else 'Python'} core"
          + (", after with right predictions" if a.after_predict else ""))
    print(f"{'instructions per packet':<24} {'before':>9} {'after':>9} {'after/before':>12}")
    for label, (old, new) in rows:
        print(f"{label:<24} {old:>9,} {new:>9,} {new / old:>12.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
