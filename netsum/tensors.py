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

from workers import quant

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
    """The float64 sum of every rank's input and the per-element bound of the quantized sum
    before its rounding to float32 (flattened, in element order)."""
    shape: tuple[int, ...]
    total: np.ndarray       # float64, flattened
    bound: np.ndarray       # float64, flattened

    def allowed(self) -> np.ndarray:
        # docs/quantization.md: |y - sum(x)| <= n*2^(E-s-1) + 2^-24*|y| (+2^-150 subnormal).
        return self.bound + np.abs(self.total) * 2.0**-24 + 2.0**-150


def reference(inputs: Sequence[np.ndarray], k: int) -> Reference:
    if not inputs:
        raise ValueError("no inputs")
    shape = tuple(inputs[0].shape)
    flat = [np.ascontiguousarray(x, dtype=np.float32).reshape(-1) for x in inputs]
    if any(f.size != flat[0].size for f in flat):
        raise ValueError("every rank's tensor must have the same number of elements")
    total = np.zeros(flat[0].size, dtype=np.float64)
    agreed = np.zeros(quant.num_blocks(flat[0].size, k), dtype=np.uint8)
    for f in flat:
        total += f
        np.maximum(agreed, quant.block_exponents(f, k), out=agreed)
    bound = quant.error_bound(agreed, len(flat), k, flat[0].size)
    return Reference(shape, total, bound)


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    max_error: float        # max |result - float64 sum|
    worst_ratio: float      # max error / allowed error over all elements (<= 1 when ok)
    problem: str            # "" when ok


def check_result(result: np.ndarray, ref: Reference) -> Verdict:
    if tuple(result.shape) != ref.shape:
        return Verdict(False, float("nan"), float("nan"),
                       f"result shape {tuple(result.shape)} != input shape {ref.shape}")
    if result.dtype != np.float32:
        return Verdict(False, float("nan"), float("nan"), f"result dtype {result.dtype}")
    err = np.abs(result.reshape(-1).astype(np.float64) - ref.total)
    if not np.isfinite(err).all():
        return Verdict(False, float("inf"), float("inf"), "result has NaN/Inf elements")
    allowed = ref.allowed()
    ratio = err / allowed
    worst = int(np.argmax(ratio)) if ratio.size else 0
    worst_ratio = float(ratio[worst]) if ratio.size else 0.0
    max_error = float(err.max()) if err.size else 0.0
    if worst_ratio > 1.0:
        return Verdict(False, max_error, worst_ratio,
                       f"element {worst}: error {err[worst]:.3g} exceeds bound "
                       f"{allowed[worst]:.3g}")
    return Verdict(True, max_error, worst_ratio, "")
