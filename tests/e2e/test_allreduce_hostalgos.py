"""The host baselines end to end, unprivileged tier: the rig runs ring and parameter-server
all-reduces as real netsum-worker processes (TCP on loopback) next to the switch all-reduce
of the same tensors.  Every result is checked against the float64 sum within the documented
bound, and the three agree bit for bit: the same agreed exponents, exact int32 sums.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from helpers import started_rigs
from netsum.rig import Rig, RigError
from netsum.tensors import synthetic_inputs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with started_rigs((4,), lambda n: tmp_path_factory.mktemp(f"host{n}"), slots=64,
                      timeout=10) as made:
        yield made[4]


@pytest.mark.parametrize("shape", [(1,), (3, 7, 5), (40_000,)], ids=["one", "3x7x5", "40k"])
def test_ina_ring_and_ps_agree_exactly(rig: Rig, shape: tuple[int, ...]) -> None:
    inputs = synthetic_inputs(4, shape, seed=len(shape))
    results = {}
    for algo in ("ina", "ring", "ps"):
        out = rig.run_job(inputs, algo=algo, keep_results=True)
        assert out.shape == shape
        for w in out.workers:
            assert w.ok, f"{algo} worker {w.rank}: {w.error}"
            assert w.error_ratio <= 1.0 and w.goodput > 0
            assert w.packets_sent > 0      # ina: netsum packets; ring/ps: the kernel's segments
        if algo != "ina":
            assert out.switch_counters == {}       # no switch job for a host all-reduce
        results[algo] = out.results
    for algo in ("ring", "ps"):
        for rank, (a, b) in enumerate(zip(results["ina"], results[algo])):
            assert np.array_equal(a, b), f"rank {rank}: {algo} differs from ina"


def test_unknown_algorithm_is_refused(rig: Rig) -> None:
    with pytest.raises(RigError, match="algorithm must be one of"):
        rig.start_job(synthetic_inputs(4, (10,)), algo="tree")
