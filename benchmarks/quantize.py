"""Quantize + encode throughput of the worker's vectorised path, in elements/s, for a 64 MiB
float32 tensor, printed next to a plain numpy copy of the same tensor measured in the same run
(the ratio is what to compare across machines).  Not a test: run it by hand.

    .venv/bin/python benchmarks/quantize.py [--mib 64] [--repeat 5] [--workers 8] [--k 32]
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from netsum.workers import batch, quant, wire
from netsum.wire import K_DEFAULT, K_SUPPORTED


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--k", type=int, default=K_DEFAULT, choices=K_SUPPORTED)
    a = p.parse_args()
    n, k = a.workers, a.k
    size = a.mib * (1 << 20) // 4
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(size) * 1e-3).astype(np.float32)
    nb = quant.num_blocks(size, k)
    fields = {"msg_type": 1, "job_id": 1, "slot": np.arange(nb) % 256,
              "round": np.arange(nb) // 256, "offset": np.arange(nb, dtype=np.int64) * k}
    # One worker's view: its own proposals as the agreed exponents (other workers only raise
    # them, which costs nothing here), the proposals of blocks 256 ahead in the exp field.
    agreed = quant.block_exponents(x, k)

    def full() -> np.ndarray:
        e = quant.block_exponents(x, k)
        return batch.encode_tensor(x, e, n, k, job_id=1, num_slots=256,
                                   proposals_ahead=np.roll(e, -256))

    rows = [
        ("numpy copy (reference)", lambda: x.copy()),
        ("block exponents", lambda: quant.block_exponents(x, k)),
        ("quantize to int32", lambda: quant.quantize(x, agreed, n, k)),
        ("encode headers + given values", lambda: wire.encode_batch(fields, agreed_q, k)),
        ("exponents + quantize + encode", full),
    ]
    agreed_q = quant.quantize(x, agreed, n, k)
    print(f"{a.mib} MiB float32 = {size} elements, K={k}, n={n}, best of {a.repeat}")
    ref = None
    for name, fn in rows:
        t = best(fn, a.repeat)
        rate = size / t
        ref = ref or rate
        print(f"  {name:32s} {t * 1e3:8.1f} ms  {rate / 1e6:8.1f} M elem/s  "
              f"{ref / rate:5.2f}x the copy's time")
    out = full()
    print(f"  encoded {len(out)} packets, {out.nbytes / (1 << 20):.1f} MiB of netsum payloads")


if __name__ == "__main__":
    main()
