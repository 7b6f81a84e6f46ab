"""netsum.workers.quant: block exponents, no int32 overflow up to MAX_WORKERS, the documented error
bound (docs/quantization.md) over random tensors of every magnitude, and clear errors."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from netsum.wire import EXP_BIAS, EXP_ZERO, K_SUPPORTED, MAX_WORKERS
from netsum.workers import quant
from netsum.workers.errors import NonFiniteError, QuantError, SumOverflowError

F32 = np.finfo(np.float32)
INT32_MAX = 2**31 - 1

# Every interesting float32: zeros of both signs, subnormals, the smallest normal, the largest
# finite, powers of two (where 2^e >= max|x| is tight) and everything in between.
SPECIAL = [0.0, -0.0, 1e-45, -1e-45, 1e-40, F32.tiny, -F32.tiny, 1.0, -1.0, 0.5, 2.0**-126,
           2.0**127, -(2.0**127), float(F32.max), -float(F32.max), 3.0e38, 1e-30, 1e30]
finite_f32 = st.one_of(
    st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.sampled_from(SPECIAL),
    st.floats(-1.0, 1.0, width=32),
)


def tensors(n: int, length: int) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.float32, (n, length), elements=finite_f32)


def allreduce_model(xs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the protocol computes, without the network: proposals, max, quantize, int sum."""
    n = len(xs)
    props = np.stack([quant.block_exponents(x, k) for x in xs])
    agreed = props.max(axis=0)
    qs = np.stack([quant.quantize(x, agreed, n, k, p) for x, p in zip(xs, props)])
    wide = qs.astype(np.int64).sum(axis=0)
    assert np.abs(qs).max() <= 2 ** quant.scale_shift(n)
    assert np.abs(wide).max() <= INT32_MAX, "int32 overflow"
    return agreed, wide.astype(np.int32), props


def check_bound(xs: np.ndarray, k: int) -> None:
    n, length = xs.shape
    agreed, sums, _ = allreduce_model(xs, k)
    try:
        out = quant.dequantize(sums, agreed, n, length)
    except SumOverflowError:
        # Only legitimate when the true sum really leaves float32.
        true = xs.astype(np.float64).sum(axis=0)
        bound = quant.error_bound(agreed, n, k, length)
        assert (np.abs(true) + bound >= float(F32.max)).any()
        return
    true = xs.astype(np.float64).sum(axis=0)  # exact enough: error << the quantization bound
    bound = quant.error_bound(agreed, n, k, length)
    # Documented bound: n * 2^(E-s-1) before rounding to float32, plus half an ulp of float32
    # (2^-24 relative, or 2^-150 absolute for subnormals) for the final rounding.
    slack = np.abs(true) * 2.0**-24 + 2.0**-150 + np.abs(true) * 2.0**-50
    err = np.abs(out.astype(np.float64) - true)
    assert (err <= bound + slack).all(), (err - bound - slack).max()


@settings(max_examples=150, deadline=None)
@given(st.integers(2, MAX_WORKERS), st.integers(1, 100), st.sampled_from(K_SUPPORTED),
       st.data())
def test_error_bound_random(n: int, length: int, k: int, data: st.DataObject) -> None:
    check_bound(data.draw(tensors(n, length)), k)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, MAX_WORKERS), st.integers(-149, 127), st.integers(0, 2**32 - 1))
def test_error_bound_mixed_magnitudes(n: int, scale_exp: int, seed: int) -> None:
    """Normal data at one magnitude with spikes of other magnitudes mixed into the blocks."""
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((n, 200)) * 2.0**scale_exp
    spikes = rng.random((n, 200)) < 0.05
    xs[spikes] *= 2.0 ** rng.integers(-60, 60, size=spikes.sum())
    xs = np.clip(xs, -float(F32.max), float(F32.max)).astype(np.float32)
    check_bound(xs, 32)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 16, 31, 32])
@pytest.mark.parametrize("value", [1.0, 2.0**-126, 2.0**127, float(F32.max), 1e-45])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_worst_case_no_overflow(n: int, value: float, sign: float) -> None:
    """Every worker at the block's maximum magnitude, all of one sign: the largest int sum."""
    xs = np.full((n, 64), sign * value, dtype=np.float32)
    agreed, sums, _ = allreduce_model(xs, 32)
    s = quant.scale_shift(n)
    assert n * 2**s <= INT32_MAX < n * 2 ** (s + 1)
    if value == float(F32.max) and n > 1:
        with pytest.raises(SumOverflowError, match="offset 0"):
            quant.dequantize(sums, agreed, n, 64)
    else:
        check_bound(xs, 32)


def test_scale_shift_values() -> None:
    assert [quant.scale_shift(n) for n in (1, 2, 3, 4, 5, 32)] == [30, 29, 29, 28, 28, 25]


@settings(deadline=None)  # a loaded CI machine must not fail a correct test
@given(hnp.arrays(np.float32, st.integers(1, 300), elements=finite_f32))
def test_block_exponent_is_tight(x: np.ndarray) -> None:
    k = 32
    exps = quant.block_exponents(x, k)
    for b, e in enumerate(exps):
        peak = float(np.abs(x[b * k:(b + 1) * k].astype(np.float64)).max())
        if peak == 0:
            assert e == EXP_ZERO
            continue
        assert 1 <= e <= 255
        ue = int(e) - EXP_BIAS
        assert 2.0**ue >= peak
        assert ue == quant.EXP_MIN or 2.0 ** (ue - 1) < peak  # least such e unless clamped


@pytest.mark.parametrize("value, biased", [
    (1.0, 127), (0.75, 127), (0.5, 126), (1.5, 128), (2.0**-126, 1), (1e-45, 1),
    (float(F32.max), 255), (2.0**127, 254), (0.0, 0),
])
def test_block_exponent_table(value: float, biased: int) -> None:
    assert quant.block_exponents(np.array([value, -value / 2], np.float32), 32)[0] == biased


@settings(deadline=None)  # a loaded CI machine must not fail a correct test
@given(st.integers(1, 64), st.integers(0, 2**32 - 1), st.sampled_from([1, 2, 7, 32]))
def test_quantize_block_matches_vectorised(length: int, seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(length) * 10.0 ** rng.uniform(-44, 38)).astype(np.float32)
    props = quant.block_exponents(x, 32)
    agreed = np.minimum(props.astype(np.int64) + rng.integers(0, 5, len(props)), 255)
    agreed = np.where(props == 0, 0, agreed).astype(np.uint8)
    q = quant.quantize(x, agreed, n, 32, props)
    rows = quant.blocks(x, 32)
    for b in range(len(props)):
        fast = quant.quantize_block(rows[b], int(agreed[b]), quant.scale_shift(n))
        assert np.array_equal(np.frombuffer(fast, ">i4"), q[b])


@pytest.mark.parametrize("length, bad_at, bad", [
    (10, 0, np.nan), (100, 99, np.inf), (100, 45, -np.inf), (1000, 999, np.nan),
])
def test_non_finite_names_offset(length: int, bad_at: int, bad: float) -> None:
    x = np.ones(length, np.float32)
    x[bad_at] = bad
    with pytest.raises(NonFiniteError, match=f"offset {bad_at}") as info:
        quant.block_exponents(x, 32)
    assert info.value.offset == bad_at


@pytest.mark.parametrize("tensor, match", [
    (np.zeros(4, np.int32), "dtype int32"),
    (np.zeros(4, np.complex64), "dtype complex64"),
    (np.array(["a"]), "dtype <U1"),
    (np.zeros(4, bool), "dtype bool"),
    (np.zeros(0, np.float32), "empty"),
    ([], "empty"),
    (np.array([1.0, 1e39]), "offset 1 .* float32 range"),
])
def test_as_tensor_rejects(tensor: object, match: str) -> None:
    with pytest.raises(QuantError, match=match):
        quant.as_tensor(tensor)


def test_as_tensor_accepts_and_flattens() -> None:
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    out = quant.as_tensor(x)
    assert out.dtype == np.float32 and out.shape == (12,)
    f32 = np.ones(5, np.float32)
    assert quant.as_tensor(f32) is f32 or np.shares_memory(quant.as_tensor(f32), f32)


@pytest.mark.parametrize("n", [0, 33, -1, True, 2.0])
def test_scale_shift_rejects(n: object) -> None:
    with pytest.raises(QuantError, match="number of workers"):
        quant.scale_shift(n)  # type: ignore[arg-type]


def test_quantize_rejects_broken_agreement() -> None:
    x = np.array([4.0] * 32, np.float32)
    props = quant.block_exponents(x, 32)
    with pytest.raises(QuantError, match="below this worker's proposal"):
        quant.quantize(x, props - 1, 2, 32, props)
    with pytest.raises(QuantError, match="agreed exponents"):
        quant.quantize(x, np.zeros(3, np.uint8), 2, 32)


def test_dequantize_rejects_inconsistent() -> None:
    with pytest.raises(QuantError, match="all zero"):
        quant.dequantize(np.ones((1, 32), np.int32), np.zeros(1, np.uint8), 2, 32)
    with pytest.raises(QuantError, match="do not match"):
        quant.dequantize(np.ones((2, 32), np.int32), np.zeros(1, np.uint8), 2, 64)
    with pytest.raises(QuantError, match="asked"):
        quant.dequantize(np.ones((1, 32), np.int32), np.ones(1, np.uint8), 2, 33)


def test_bound_formula() -> None:
    # E = 0 (biased 127), n = 4 -> s = 28: bound = 4 * 2^(0 - 28 - 1) = 2^-27.
    b = quant.error_bound(np.array([127, 0], np.uint8), 4, 32, 40)
    assert b[0] == math.ldexp(1, -27) and b[39] == 0 and len(b) == 40
