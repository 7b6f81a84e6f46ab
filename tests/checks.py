"""The accuracy check every test applies to an all-reduce result, with its bound derived from
the inputs alone (all workers' tensors): the agreed exponents must be the max of every worker's
proposal, and the sum within the documented bound for those exponents (netsum.tensors).  Never
from what a result carries (`AllreduceResult.bound` widens with a wrong exponent)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netsum.tensors import check_result, reference
from netsum.wire import K_DEFAULT

__all__ = ["assert_sum_of_inputs"]


def assert_sum_of_inputs(results: Sequence[object], inputs: Sequence[np.ndarray],
                         k: int = K_DEFAULT) -> None:
    """`results` are AllreduceResults (or float32 tensors) of one call of every worker (or
    some of them); all must equal each other bit for bit and be correct for `inputs` in blocks
    of `k` (the default: JobConfig's, the K of a job that does not say)."""
    ref = reference(inputs, k)
    tensors = [getattr(r, "tensor", r) for r in results]
    for i, (r, t) in enumerate(zip(results, tensors)):
        exps = getattr(r, "exponents", None)
        if exps is not None:
            np.testing.assert_array_equal(exps, ref.agreed, err_msg=f"result {i}: exponents "
                                          "are not the max of every worker's proposal")
        verdict = check_result(np.asarray(t).reshape(ref.shape), ref)
        assert verdict.ok, f"result {i}: {verdict.problem}"
        assert np.array_equal(t, tensors[0]), f"results 0 and {i} differ"
