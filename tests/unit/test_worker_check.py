"""`netsum-worker --check` judges a result by the inputs alone: every rank's synthetic tensor,
the agreed exponents they give (the max of every rank's proposal) and the bound for those.
A switch that lies consistently -- every worker quantizes and dequantizes with the exponent it
returned, one too high or one too low -- must fail the check as surely as a wrong sum.  The
expectations here are worked out from docs/quantization.md's formulas with math.frexp, not
with netsum.workers.quant."""
from __future__ import annotations

import argparse
import math
from types import SimpleNamespace

import numpy as np
import pytest

from netsum.workers.cli import _check, synthetic

N, K, SIZE, SEED = 3, 32, 1000, 4
SHIFT = (((1 << 31) - 1) // N).bit_length() - 1          # s with n * 2^s <= 2^31 - 1


def agreed_from_inputs(xs: list[np.ndarray]) -> np.ndarray:
    """Biased exponent per block: the least e with max|x| <= 2^e over every rank (0: all zero)."""
    pad = -SIZE % K
    peak = np.max([np.abs(np.pad(x.astype(np.float64), (0, pad))).reshape(-1, K).max(axis=1)
                   for x in xs], axis=0)
    e = [math.frexp(p)[1] - (math.frexp(p)[0] == 0.5) if p else 0 for p in peak]
    return np.array([min(255, max(1, v + 127)) if p else 0 for v, p in zip(e, peak)], np.uint8)


def switch_result(xs: list[np.ndarray], exps: np.ndarray) -> SimpleNamespace:
    """What every worker ends with when the switch returns `exps`: each rank quantizes with
    them, the switch sums exactly, each worker dequantizes with them."""
    per_elem = np.repeat(exps.astype(np.int64), K)[:SIZE]
    scale = np.where(per_elem > 0, np.ldexp(1.0, (SHIFT - (per_elem - 127)).astype(int)), 0.0)
    total = sum(np.rint(x.astype(np.float64) * scale) for x in xs)
    back = np.where(per_elem > 0, np.ldexp(1.0, (per_elem - 127 - SHIFT).astype(int)), 0.0)
    return SimpleNamespace(tensor=(total * back).astype(np.float32), exponents=exps.copy())


def args() -> argparse.Namespace:
    return argparse.Namespace(seed=SEED, workers=N, k=K, size=SIZE)


@pytest.fixture(scope="module")
def inputs() -> tuple[list[np.ndarray], np.ndarray]:
    xs = [synthetic(SEED, r, SIZE) for r in range(N)]
    return xs, agreed_from_inputs(xs)


def test_the_right_result_passes(inputs: tuple[list[np.ndarray], np.ndarray]) -> None:
    xs, agreed = inputs
    assert (agreed > 0).all() and (agreed < 255).all()
    assert _check(args(), switch_result(xs, agreed))  # type: ignore[arg-type]


@pytest.mark.parametrize("delta", [1, -1, 5])
def test_an_exponent_above_or_below_the_agreed_one_fails(
        inputs: tuple[list[np.ndarray], np.ndarray], delta: int) -> None:
    xs, agreed = inputs
    for block in (0, len(agreed) // 2, len(agreed) - 1):
        exps = agreed.copy()
        exps[block] = int(exps[block]) + delta
        assert not _check(args(), switch_result(xs, exps)), (block, delta)  # type: ignore[arg-type]


def test_every_exponent_255_fails(inputs: tuple[list[np.ndarray], np.ndarray]) -> None:
    """The mutant that was not caught once: every result ~0 under exp = 255."""
    xs, agreed = inputs
    assert not _check(args(), switch_result(xs, np.full_like(agreed, 255)))  # type: ignore[arg-type]


def test_a_sum_off_by_more_than_the_bound_fails(
        inputs: tuple[list[np.ndarray], np.ndarray]) -> None:
    xs, agreed = inputs
    res = switch_result(xs, agreed)
    i = int(np.argmax(np.abs(res.tensor)))
    # The bound is n * 2^(E-s-1) plus half an ulp of float32; 16 ulps is far beyond it.
    bad = res.tensor.copy()
    bad[i] = np.float32(float(bad[i]) * (1 + 2.0**-20))
    assert bad[i] != res.tensor[i]
    assert not _check(args(), SimpleNamespace(tensor=bad, exponents=res.exponents))  # type: ignore[arg-type]
