"""Inf and NaN through the switch (netsum.training.nonfinite, the quantizer's side in
netsum.workers.quant): every rank gets Inf/NaN in the same elements as gloo, i.e. as IEEE
addition of the inputs, and the finite elements within the quantization bound.

Expectations come from the inputs: numpy's float64 sum of the raw tensors (IEEE: x + Inf =
Inf, Inf + -Inf = NaN, NaN + x = NaN -- what gloo's sum computes) and the bound of
docs/quantization.md over the finite inputs.  Two ways through:

* the lane engine over the test oracle of the switch with the real worker core (the sentinel
  carrier: the v1 wire as it is today);
* a fake core at the carrier seam, for the v2 NONFINITE header flag (the switch ORs the
  flags; the core that sends them is another helper's work): sums computed by the quantizer's
  own functions, flags ORed, then the same mask round and rebuild.
"""
from __future__ import annotations

import numpy as np
import pytest

from netsum.training.lanes import LaneError
from netsum.training.nonfinite import (NONFINITE, SENTINEL_E, ExponentSentinel, HeaderFlag,
                                       mask_round, rebuild)
from netsum.wire import EXP_BIAS
from netsum.workers import quant
from test_training_lanes import TRANSPORTS, K, bound_from_inputs, engines

INF, NAN = np.inf, np.nan


def ieee_sum(xs: list[np.ndarray]) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.sum(np.stack([x.astype(np.float64) for x in xs]), axis=0)


def check(got: np.ndarray, xs: list[np.ndarray]) -> None:
    want = ieee_sum(xs)
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN in other elements than gloo's"
    assert np.array_equal(np.isposinf(got), np.isposinf(want)), "+Inf elsewhere than gloo's"
    assert np.array_equal(np.isneginf(got), np.isneginf(want)), "-Inf elsewhere than gloo's"
    fin = np.isfinite(want)
    finite_in = [np.where(np.isfinite(x), x, 0).astype(np.float32) for x in xs]
    bound = bound_from_inputs(finite_in)
    assert np.all(np.abs(got[fin] - want[fin]) <= bound[fin])


# -- the quantizer's side -------------------------------------------------------------------
def test_sanitize_zeroes_what_float32_cannot_hold_and_flags_those_blocks() -> None:
    x = np.array([1.0, INF, 2.0, 3.0, -INF, 0.0, NAN, 5.0, 6.0, 7.0], np.float64)
    x[9] = 1e39                               # a float64 beyond float32
    s = quant.sanitize(x, 4)
    assert s.values.dtype == np.float32
    assert s.values.tolist() == [1, 0, 2, 3, 0, 0, 0, 5, 6, 0]
    assert s.blocks.tolist() == [True, True, True]
    assert s.count == 4
    clean = quant.sanitize(np.arange(9, dtype=np.float32), 4)
    assert clean.count == 0 and not clean.blocks.any() and len(clean.blocks) == 3
    # No part in the exponent: the block's proposal is that of its finite elements.
    assert quant.block_exponents(quant.sanitize(np.array([0.5, INF], np.float32), 2).values,
                                 2).tolist() == [-1 + EXP_BIAS]


@pytest.mark.parametrize("a,b,want", [
    (INF, 1.0, INF), (-INF, 1.0, -INF), (INF, INF, INF), (INF, -INF, NAN), (NAN, 1.0, NAN),
    (NAN, INF, NAN), (1.0, 2.0, 3.0), (-INF, -INF, -INF)])
def test_class_codes_rebuild_ieee_addition(a: float, b: float, want: float) -> None:
    xa, xb = np.array([a], np.float32), np.array([b], np.float32)
    codes = quant.class_codes(xa) + quant.class_codes(xb)
    finite = np.array([sum(v for v in (a, b) if np.isfinite(v))], np.float32)
    got = quant.apply_classes(finite, codes)[0]
    assert (np.isnan(got) and np.isnan(want)) or got == want


def test_class_code_sums_of_32_ranks_are_exact_in_float32_and_in_the_quantizer() -> None:
    worst = 32 * (quant.CODE_POS_INF + quant.CODE_NEG_INF + quant.CODE_NAN + quant.CODE_RANGE)
    assert worst < 2 ** 24
    codes = [np.full(K, c, np.float32) for c in (quant.CODE_RANGE, quant.CODE_NAN,
                                                 quant.CODE_NEG_INF, quant.CODE_POS_INF)] * 8
    agreed = np.maximum.reduce([quant.block_exponents(c, K) for c in codes])
    sums = np.sum([quant.quantize(c, agreed, 32, K).astype(np.int64) for c in codes], axis=0)
    back = quant.dequantize(sums.astype(np.int32), agreed, 32, K)
    assert np.array_equal(back.astype(np.int64), np.sum(codes, axis=0).astype(np.int64))


def test_a_float64_beyond_float32_on_one_rank_is_an_error_on_every_rank() -> None:
    codes = quant.class_codes(np.array([0.0, 1e300])) + quant.class_codes(np.zeros(2))
    with pytest.raises(quant.QuantError, match="offset 1 is a float64 beyond float32's range "
                       "on 1 rank"):
        quant.apply_classes(np.zeros(2, np.float32), codes)


# -- the mask round against a fake core at the carrier seam ---------------------------------
def fake_allreduce(values: list[np.ndarray], flags: list[np.ndarray | None]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What a switch with the v2 NONFINITE flag returns: the quantized sum (the quantizer's own
    functions, as the worker core would use them), the agreed exponents, and the RESULT's
    flags per block (`AllreduceResult.flags` of the v2 core) with NONFINITE ORed in."""
    n = len(values)
    agreed = quant.agreed_exponents(values, K)
    total = np.sum([quant.quantize(v, agreed, n, K).astype(np.int64) for v in values], axis=0)
    sums = quant.dequantize(total.astype(np.int32), agreed, n, len(values[0]))
    # The RESULT's flags byte per block: NONFINITE where some rank flagged it; other bits (ACK,
    # RETX) set here and there, as a switch may, must not count.
    out = np.where(np.arange(len(agreed)) % 3 == 0, 0x04, 0).astype(np.uint8)
    for f in flags:
        if f is not None:
            out |= np.where(f, NONFINITE, 0).astype(np.uint8)
    return sums, agreed, out


def run_carrier(carrier: ExponentSentinel | HeaderFlag, xs: list[np.ndarray]) -> np.ndarray:
    ss = [quant.sanitize(x, K) for x in xs]
    first, exps, ored = fake_allreduce([carrier.first_round(s, K) for s in ss],
                                       [carrier.core_flags(s) for s in ss])
    flagged = carrier.flagged(exps, ored)
    if not len(flagged):
        return first
    seconds = [mask_round(s, quant.class_codes(x), flagged, K, carrier.resend_values)
               for s, x in zip(ss, xs)]
    assert len({len(t) for t in seconds}) == 1, "every rank's mask round has one length"
    second, _, _ = fake_allreduce(seconds, [None] * len(xs))
    return rebuild(first, second, flagged, K, carrier.resend_values)


def patterns() -> list[list[np.ndarray]]:
    rng = np.random.default_rng(3)
    out = []
    for n in (2, 3):
        for _ in range(6):
            length = int(rng.integers(1, 5 * K))
            xs = [(rng.standard_normal(length) * 10.0 ** rng.integers(-4, 4)).astype(np.float32)
                  for _ in range(n)]
            for x in xs:
                hits = rng.integers(0, length, size=int(rng.integers(0, 4)))
                x[hits] = rng.choice([INF, -INF, NAN], size=len(hits))
            out.append(xs)
    return out


@pytest.mark.parametrize("carrier", [ExponentSentinel(), HeaderFlag()],
                         ids=["sentinel", "header-flag"])
@pytest.mark.parametrize("case", range(12))
def test_the_mask_round_rebuilds_gloos_inf_and_nan(carrier: ExponentSentinel | HeaderFlag,
                                                    case: int) -> None:
    xs = patterns()[case]
    check(run_carrier(carrier, xs), xs)


def test_the_sentinel_flags_only_blocks_with_inf_nan_or_huge_values() -> None:
    x = np.ones(3 * K, np.float32)
    x[K + 5] = NAN
    x[2 * K] = 2.0 ** 122           # legitimate but huge: flagged too, harmlessly
    s = quant.sanitize(x, K)
    first = ExponentSentinel().first_round(s, K)
    exps = quant.block_exponents(first, K)
    assert ExponentSentinel().flagged(exps, None).tolist() == [1, 2]
    assert int(exps[1]) == SENTINEL_E + EXP_BIAS
    assert np.array_equal(first[:K], x[:K]), "an unflagged block is sent as it is"
    check(run_carrier(ExponentSentinel(), [x, np.ones(3 * K, np.float32)]),
          [x, np.ones(3 * K, np.float32)])


# -- through the lane engine, the real worker core and the oracle ----------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_inf_and_nan_reach_every_rank_in_gloos_elements_and_the_lane_stays_aligned(
        transport: str) -> None:
    """Over both transports: on frames, the compiled core sends and ORs the per-block
    NONFINITE flags."""
    link, (a, b) = engines(lanes=2, transport=transport)
    rng = np.random.default_rng(11)
    xs = [[rng.standard_normal(n).astype(np.float32) for n in (300, 40, 200, 70)]
          for _ in range(2)]
    xs[0][0][[3, 250]] = [INF, NAN]
    xs[1][0][[3, 100]] = [-INF, INF]       # Inf + -Inf at 3: NaN
    xs[1][2][199] = -INF                   # only rank 1, lane 0's second tensor
    try:
        fa = [a.submit(x, f"t{i}") for i, x in enumerate(xs[0])]
        fb = [b.submit(x, f"t{i}") for i, x in enumerate(xs[1])]
        for i, (f0, f1) in enumerate(zip(fa, fb)):
            r0, r1 = f0.result(timeout=30), f1.result(timeout=30)
            check(r0.tensor, [xs[0][i], xs[1][i]])
            assert np.array_equal(r0.tensor, r1.tensor, equal_nan=True)
        assert a.mask_rounds == b.mask_rounds == 2
    finally:
        a.close()
        b.close()
    assert link.switch.overflowed == 0


def test_float16_and_float64_tensors_and_the_float64_range_error_on_both_ranks() -> None:
    link, (a, b) = engines(lanes=1)
    h = [np.array([1.5, -2.25, np.inf, 65504.0], np.float16), np.full(4, 0.5, np.float16)]
    d = [np.array([1.0, 2.0 ** -30, 3.0]), np.array([1e300, 1.0, 2.0])]
    try:
        fh = [e.submit(x) for e, x in zip((a, b), h)]
        fd = [e.submit(x, "f64") for e, x in zip((a, b), d)]
        after = [e.submit(np.full(5, 1.0, np.float32)) for e in (a, b)]
        got = fh[0].result(timeout=30).tensor
        assert got.tolist()[:2] == [2.0, -1.75] and got[2] == np.inf and got[3] == 65504.5
        for f in fd:
            with pytest.raises(LaneError, match="f64, mask round .*offset 0 is a float64 beyond "
                               "float32's range on 1 rank"):
                f.result(timeout=30)
        for f in after:
            assert f.result(timeout=30).tensor.tolist() == [2.0] * 5
    finally:
        a.close()
        b.close()


def test_an_empty_tensor_completes_at_once_and_takes_no_lane() -> None:
    link, (a, b) = engines(lanes=2)
    try:
        assert a.submit(np.zeros(0, np.float32)).result(timeout=1).tensor.size == 0
        fa, fb = (e.submit(np.ones(3, np.float32)) for e in (a, b))
        assert fa.result(timeout=20).lane == 0 and fb.result(timeout=20).lane == 0
    finally:
        a.close()
        b.close()
