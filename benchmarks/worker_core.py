"""Per-packet cost of the sans-I/O worker core, measured side by side with the floor of the
same work done bare (pack a header, quantize one block, unpack a header, store the values):
the ratio is the core's bookkeeping overhead (window, timers, acceptance, statistics).  The
"switch" is an in-process echo turning each DATA into its RESULT (a one-worker job), so no
socket or switch cost is included.  Not a test: run it by hand.

    .venv/bin/python benchmarks/worker_core.py [--blocks 20000] [--slots 256] [--repeat 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from workers import quant, wire
from workers.core import JobConfig, Timing, WorkerCore
from workers.protocol import HEADER_BYTES, MsgType


def to_result(packet: bytes) -> bytes:
    # msg_type is byte 0, count byte 7 (HEADER_FIELDS); the values are the one-worker sum.
    return bytes((MsgType.RESULT,)) + packet[1:7] + b"\x01" + packet[8:]


def run_core(x: np.ndarray, slots: int) -> tuple[int, float]:
    core = WorkerCore(x, JobConfig(1, 1, slots), Timing())
    t = time.perf_counter()
    pending = list(core.start(0.0).send)
    n = 0
    while pending:
        n += 1
        pending += core.receive(to_result(pending.pop()), 0.001).send
    dt = time.perf_counter() - t
    res = core.result()
    assert (np.abs(res.tensor - x) <= res.bound).all()
    return n, dt


def run_bare(x: np.ndarray) -> tuple[int, float]:
    codec = wire.header_codec()
    rows = quant.blocks(x, 32)
    sums = np.zeros_like(rows, dtype=np.int32)
    s = quant.scale_shift(1)
    t = time.perf_counter()
    for b in range(len(rows)):
        pkt = codec.pack(msg_type=1, job_id=1, slot=b % 256, exp=127, offset=b * 32) \
            + quant.quantize_block(rows[b], 127, s)
        codec.unpack(to_result(pkt))
        sums[b] = np.frombuffer(pkt, ">i4", offset=HEADER_BYTES)
    return len(rows), time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=20000)
    p.add_argument("--slots", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    x = np.random.default_rng(0).uniform(-1, 1, 32 * a.blocks).astype(np.float32)
    bare = min((run_bare(x) for _ in range(a.repeat)), key=lambda r: r[1])
    core = min((run_core(x, a.slots) for _ in range(a.repeat)), key=lambda r: r[1])
    print(f"{a.blocks} blocks of 32, window {a.slots}, best of {a.repeat}")
    for name, (n, dt) in (("bare pack/quantize/unpack/store", bare),
                          ("WorkerCore send+receive", core)):
        print(f"  {name:34s} {n / dt / 1e3:8.1f} k packets/s  {dt / n * 1e6:6.1f} us/packet  "
              f"{dt / n / (bare[1] / bare[0]):5.2f}x the bare cost")


if __name__ == "__main__":
    main()
