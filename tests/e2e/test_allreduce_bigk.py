"""All-reduce at K=1024 (beyond a Tofino-class switch's 256 values per packet: an emulation
lever, docs/protocol.md) end to end: real netsum-switch daemons running netsum.p4 built with
-DNETSUM_K=1024, configured by the controller, real netsum-worker processes, over
shared-memory ports (the rig gives them frame=4224) and over UDP-tunnel ports.

Every worker's result must be, bit for bit, the integer sums computed from the inputs alone
(tests/exactsums.py: docs/quantization.md's formulas, not the workers' quantizer) dequantized;
a tensor whose length is not a multiple of K ends in a short block, whose reference is the
block padded with zeros (zeros change neither the block's max nor its sums)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from exactsums import reference_results
from helpers import assert_switch_clean, started_rigs
from netsum.rig import Mode, Rig
from netsum.tensors import synthetic_inputs
from test_allreduce_udp import assert_exact

K = 1024
WORKERS = 4
#: Slow as a whole: the module's rigs (K=1024 daemons) take ~18 s to start, whichever test
#: comes first.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rigs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Mode, Rig]]:
    out: dict[Mode, Rig] = {}
    with started_rigs((WORKERS,), lambda n: tmp_path_factory.mktemp("shm"), slots=64,
                      timeout=30, mode=Mode.SHM, k=K) as shm, \
            started_rigs((WORKERS,), lambda n: tmp_path_factory.mktemp("udp"), slots=64,
                         timeout=30, k=K) as udp:
        out[Mode.SHM], out[Mode.UDP] = shm[WORKERS], udp[WORKERS]
        yield out


@pytest.mark.parametrize("mode", [Mode.SHM, Mode.UDP], ids=["shm", "udp"])
@pytest.mark.parametrize("n", [1, K, K + 1, 40 * K + 7], ids=["one", "K", "K+1", "windows"])
def test_k1024_sums_are_the_reference_bit_for_bit(rigs: dict[Mode, Rig], mode: Mode,
                                                   n: int) -> None:
    xs = synthetic_inputs(WORKERS, (n,), seed=n + 3)
    out = rigs[mode].run_job(xs, keep_results=True)
    assert_exact(out)
    assert out.problems == ()
    want = reference_results(xs, K)
    assert len(out.results) == WORKERS
    for r in out.results:
        assert r.reshape(-1).tobytes() == want.tobytes()
    # ceil(n / K) blocks: the packets carried K values each (at least one DATA per block
    # and worker reached the switch)
    assert out.switch_counters["data_in"] >= WORKERS * -(-n // K)


def test_the_switch_counted_no_fault(rigs: dict[Mode, Rig]) -> None:
    for rig in rigs.values():
        for addr in rig.grpc_addrs.values():
            assert_switch_clean(addr)
