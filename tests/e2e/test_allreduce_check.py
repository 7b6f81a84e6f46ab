"""The rig's result check (netsum.tensors) on exactly simulated quantized sums: what the switch
would return passes, a result off by more than the documented bound fails, and the chunked
check sees every element (no switch involved: this pins the judge the e2e tiers rely on)."""
from __future__ import annotations

import numpy as np
import pytest

import netsum.tensors as tensors
from netsum.tensors import check_result, reference, synthetic_inputs
from netsum.workers import quant


def switch_sum(xs: list[np.ndarray], k: int) -> tuple[np.ndarray, tensors.Reference]:
    """The sum a correct switch produces: int32 sums of every rank's quantized blocks."""
    n = len(xs)
    ref = reference(xs, k)
    q = sum(quant.quantize(x.reshape(-1), ref.agreed, n, k).astype(np.int64) for x in xs)
    y = quant.dequantize(q, ref.agreed, n, xs[0].size).reshape(xs[0].shape)
    return y, ref


CASES = [(1, (1,), 32), (2, (1,), 32), (2, (32,), 32), (3, (33,), 32), (4, (5, 7, 3), 64),
         (8, (10_000,), 32), (32, (257,), 64), (4, (3 * 1024 + 5,), 64)]


@pytest.mark.parametrize("n,shape,k", CASES)
def test_exact_sum_passes_and_a_perturbed_one_fails(n: int, shape: tuple[int, ...], k: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensors, "CHUNK", 1000)  # several chunks for the larger cases
    y, ref = switch_sum(synthetic_inputs(n, shape, seed=n), k)
    v = check_result(y, ref)
    assert v.ok and v.worst_ratio <= 1.0, v
    for i in {0, y.size // 2, y.size - 1}:
        bad = y.copy().reshape(-1)
        bad[i] += np.float32(2 * ref.allowed(i, i + 1)[0]) + np.float32(1e-30)
        assert bad[i] != y.reshape(-1)[i]   # twice the bound is more than float32 rounding
        v = check_result(bad.reshape(shape), ref)
        assert not v.ok and f"element {i}:" in v.problem, v


def test_chunked_bound_equals_whole_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    xs = synthetic_inputs(3, (2500,), seed=2)
    ref = reference(xs, 32)
    whole = ref.allowed()
    parts = np.concatenate([ref.allowed(a, min(a + 333, 2500)) for a in range(0, 2500, 333)])
    assert np.array_equal(whole, parts)


@pytest.mark.parametrize("mutate,fragment", [
    (lambda y: y.reshape(-1, 1), "shape"),
    (lambda y: y.astype(np.float64), "dtype"),
    (lambda y: np.where(np.arange(y.size) == 3, np.float32("nan"), y).astype(np.float32),
     "element 3"),
])
def test_malformed_results_fail(mutate, fragment: str) -> None:  # type: ignore[no-untyped-def]
    y, ref = switch_sum(synthetic_inputs(2, (100,), seed=1), 32)
    v = check_result(mutate(y), ref)
    assert not v.ok and fragment in v.problem


def test_reference_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match="same number"):
        reference([np.zeros(3, np.float32), np.zeros(4, np.float32)], 32)
    with pytest.raises(Exception, match="NaN|nan|finite"):
        reference([np.array([1.0, np.nan], np.float32)] * 2, 32)
