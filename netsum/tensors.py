"""Test tensors for end-to-end runs and the check of an all-reduce result.

Owns: the synthetic per-rank inputs (any float32 shape), the float64 reference sum, and the
documented quantization bound (docs/quantization.md) evaluated for the exact inputs: the agreed
exponent of each block is the max of every rank's proposal, so the bound a run must meet is
known before the run, independently of what the switch and the workers did.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netsum.workers import quant

__all__ = ["synthetic_inputs", "Reference", "reference", "Verdict", "check_result"]


def synthetic_inputs(workers: int, shape: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    """One float32 tensor of `shape` per rank: normal values whose magnitude depends on the rank
    (so the agreed exponent is not every rank's own), with some exact zeros."""
    out = []
    for rank in range(workers):
        rng = np.random.default_rng([seed, rank])
        x = rng.standard_normal(shape, dtype=np.float32)
        x *= np.float32(10.0 ** rng.uniform(-2, 2))
        x[rng.random(shape, dtype=np.float32) < 0.05] = 0.0
        out.append(x)
    return out


@dataclass(frozen=True, slots=True)
class Reference:
    """The float64 sum of every rank's input (flattened, in element order) and the agreed
    biased exponent of each K-block, from which the per-element bound follows."""
    shape: tuple[int, ...]
    total: np.ndarray       # float64, flattened
    agreed: np.ndarray      # uint8 per block: the exponent it must be quantized with
    workers: int
    k: int

    def allowed(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Allowed |result - total| for elements start..stop.  docs/quantization.md:
        |y - sum(x)| <= n*2^(E-s-1) + 2^-24*|y| (+2^-150 when y is subnormal)."""
        stop = self.total.size if stop is None else stop
        b0, b1 = start // self.k, -(-stop // self.k)
        bound = quant.error_bound(self.agreed[b0:b1], self.workers, self.k,
                                  (b1 - b0) * self.k)
        lo = start - b0 * self.k
        total = self.total[start:stop]
        return bound[lo:lo + (stop - start)] + np.abs(total) * 2.0**-24 + 2.0**-150


def reference(inputs: Sequence[np.ndarray], k: int, predict: np.ndarray | None = None,
              slack: int = 0) -> Reference:
    """What a check needs, from the inputs alone: their float64 sum and the exponent each
    block must be quantized with -- the max of every rank's proposal, or with predictions
    (docs/quantization.md, "Speculative exponents") the prediction where that max is at most
    it and it at most max + slack, EXP_ZERO where every block is zero, the max otherwise."""
    if not inputs:
        raise ValueError("no inputs")
    shape = tuple(inputs[0].shape)
    flat = [np.asarray(x, dtype=np.float32).reshape(-1) for x in inputs]
    if any(f.size != flat[0].size for f in flat):
        raise ValueError("every rank's tensor must have the same number of elements")
    total = np.zeros(flat[0].size, dtype=np.float64)
    for f in flat:
        total += f
    agreed = quant.agreed_exponents(flat, k)
    if predict is not None:
        m = agreed.astype(np.int64)
        p = np.asarray(predict).astype(np.int64)
        if p.shape != m.shape:
            raise ValueError(f"predict has {p.shape} exponents for {m.shape} blocks")
        hit = (m <= p) & (p <= m + slack)
        agreed = np.where(m == 0, 0, np.where(hit, p, m)).astype(np.uint8)
    return Reference(shape, total, agreed, len(flat), k)


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    max_error: float        # max |result - float64 sum|
    worst_ratio: float      # max error / allowed error over all elements (<= 1 when ok)
    problem: str            # "" when ok


#: Elements checked per pass: bounds the temporaries for tensors of hundreds of MB.
CHUNK = 1 << 20


def check_result(result: np.ndarray, ref: Reference) -> Verdict:
    if tuple(result.shape) != ref.shape:
        return Verdict(False, float("nan"), float("nan"),
                       f"result shape {tuple(result.shape)} != input shape {ref.shape}")
    if result.dtype != np.float32:
        return Verdict(False, float("nan"), float("nan"), f"result dtype {result.dtype}")
    flat = result.reshape(-1)
    max_error = worst_ratio = 0.0
    worst = 0
    worst_err = worst_allowed = 0.0
    for start in range(0, flat.size, CHUNK):
        stop = min(start + CHUNK, flat.size)
        err = np.abs(flat[start:stop].astype(np.float64) - ref.total[start:stop])
        if not np.isfinite(err).all():
            i = start + int(np.flatnonzero(~np.isfinite(err))[0])
            return Verdict(False, float("inf"), float("inf"), f"element {i} is {flat[i]}")
        allowed = ref.allowed(start, stop)
        ratio = err / allowed
        i = int(np.argmax(ratio))
        max_error = max(max_error, float(err.max()))
        if ratio[i] > worst_ratio:
            worst_ratio, worst = float(ratio[i]), start + i
            worst_err, worst_allowed = float(err[i]), float(allowed[i])
    if worst_ratio > 1.0:
        return Verdict(False, max_error, worst_ratio,
                       f"element {worst}: error {worst_err:.3g} exceeds bound "
                       f"{worst_allowed:.3g}")
    return Verdict(True, max_error, worst_ratio, "")
