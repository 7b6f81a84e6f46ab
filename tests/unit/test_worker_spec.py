"""Speculative exponents in the worker core (docs/quantization.md, "Speculative exponents"):
a block's first use carries its values quantized with the caller's prediction and the
worker's proposal for that very block; a hit keeps the values, a miss sends the block again
with the max the switch returned.  The expectations come from the inputs and the predictions
alone (tests/exactsums.py: `speculated`, the integer sums), the frames from docs/protocol.md,
worked out here by hand."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from exactsums import reference_results, speculated, spread_inputs
from oracle import LossyLink, Network, OracleSwitch

from netsum.tensors import check_result, reference
from netsum.wire import EXP_BIAS, EXP_ZERO, HEADER_BYTES, Flags, MsgType, Reason
from netsum.workers import quant, wire
from netsum.workers.core import AgreementError, JobConfig, Timing, WorkerCore
from netsum.workers.errors import RejectedError, WorkerTimeoutError

K = 32
FAST = Timing(rto_initial=0.005, rto_min=0.002, rto_max=0.1, progress_deadline=2.0)


def maxima_of(xs: list[np.ndarray], k: int = K) -> np.ndarray:
    """The max of every rank's proposal per block, from the inputs (quant's proposal rule is
    checked against a hand-written one in test_quant)."""
    return np.max([quant.block_exponents(x, k) for x in xs], axis=0)


def run(xs: list[np.ndarray], slots: int, predict: np.ndarray | None, slack: int = 0,
        loss: float = 0.0, seed: int = 0, rounds: list | None = None,
        net: Network | None = None) -> tuple[list, Network]:
    n = len(xs)
    if net is None:
        rng = np.random.default_rng(seed)
        switch = OracleSwitch(k=K, members={5: list(range(n))}, num_slots={5: slots})
        net = Network(switch, LossyLink(rng, loss=loss, dup=loss / 2, reorder=loss),
                      LossyLink(rng, loss=loss, dup=loss / 2, reorder=loss))
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=K)
    cores = {i: WorkerCore(xs[i], job, FAST, None if rounds is None else rounds[i],
                           predict=predict, slack=slack) for i in range(n)}
    net.run(cores)
    return [cores[i].result() for i in range(n)], net


def inputs(seed: int, n: int, length: int) -> list[np.ndarray]:
    return spread_inputs(seed, n, length, decades=2)


def check(results: list, xs: list[np.ndarray], predict: np.ndarray, slack: int) -> None:
    want = reference_results(xs, K, predict, slack)
    used = speculated(maxima_of(xs), predict, slack)
    ref = reference(xs, K, predict, slack)     # what netsum-worker --check and the rig use
    np.testing.assert_array_equal(ref.agreed, used)
    for r in results:
        np.testing.assert_array_equal(r.tensor, want)
        np.testing.assert_array_equal(r.exponents, used)
        assert check_result(r.tensor, ref).ok
        np.testing.assert_array_equal(r.maxima, maxima_of(xs))


@pytest.mark.parametrize("n, slots, length, loss", [
    (2, 4, 1000, 0.0), (3, 8, 1001, 0.1), (4, 64, 300, 0.1), (5, 1, 200, 0.2)])
@pytest.mark.parametrize("slack", [0, 2])
def test_predictions_that_hit_and_miss_give_the_rule_s_sums(n: int, slots: int, length: int,
                                                             loss: float, slack: int) -> None:
    """Predictions scattered around the true maxima (-3..+3, some EXP_ZERO): every rank's
    result is bit for bit the integer sum with the exponents the rule gives, the misses are
    the blocks the rule sends twice, and no packet is a bootstrap."""
    xs = inputs(n * 10 + slots, n, length)
    m = maxima_of(xs)
    rng = np.random.default_rng(length)
    predict = np.clip(m.astype(int) + rng.integers(-3, 4, len(m)), 0, 255)
    predict[rng.random(len(m)) < 0.1] = EXP_ZERO
    results, net = run(xs, slots, predict, slack, loss, seed=n)
    check(results, xs, predict, slack)
    used = speculated(m, predict, slack)
    first_try = (used == predict) | (m == EXP_ZERO)
    misses = int((~first_try).sum())
    assert 0 < misses < len(m)
    for r in results:
        st = r.stats
        assert st.bootstrap_packets == 0 and st.misses == misses
        assert st.chunks == len(m)
        assert st.packets_sent == len(m) + misses + st.retransmissions
        assert st.results == len(m) + misses
    assert isinstance(net.switch, OracleSwitch) and net.switch.overflowed == 0


def test_right_predictions_take_one_use_per_block() -> None:
    """Predicted from a previous call's maxima on the same data: every block in one use,
    exactly the sums of the agreed scheme (exponents = maxima)."""
    xs = inputs(7, 4, 5000)
    first, net = run(xs, 16, None)
    again, _ = run(xs, 16, first[0].maxima, rounds=[r.next_rounds for r in first], net=net)
    nb = -(-5000 // K)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.tensor, b.tensor)
        np.testing.assert_array_equal(b.exponents, a.exponents)
        assert a.stats.packets_sent == 2 * nb if nb <= 16 else nb + 16
        assert b.stats.packets_sent == nb and b.stats.misses == 0
        np.testing.assert_array_equal(a.maxima, a.exponents)   # without predictions


def one(xs: np.ndarray, predict: list[int], slack: int = 0, slots: int = 2
        ) -> tuple[WorkerCore, list[bytes]]:
    job = JobConfig(job_id=9, num_workers=2, num_slots=slots, k=K)
    core = WorkerCore(xs, job, FAST, predict=np.array(predict), slack=slack)
    return core, list(core.start(0.0).send)


def answer(data: bytes, exp: int, values: np.ndarray | None = None) -> bytes:
    """The RESULT of `data`'s round, with max exponent `exp` and `values` (zeros if None)."""
    h = wire.decode_header(data, K)
    out = dataclasses.replace(h, msg_type=MsgType.RESULT, exp=exp, count=2)
    return wire.encode(out, np.zeros(K, np.int32) if values is None else values, K)


def test_frames_by_hand() -> None:
    """Two blocks on two slots: block 0 (peak 3.0: proposal 2 + 127) predicted 130 (2^3, one
    above), block 1 (peak 0.75: proposal 127) predicted 126 (below its own proposal: sent as
    zeros).  Each first use carries the proposal for the block itself in `exp`, the prediction
    in byte 18; the miss goes again in the slot's next round with the max in byte 18."""
    x = np.zeros(2 * K, np.float32)
    x[0], x[1], x[K] = 3.0, -1.0, 0.75
    core, sent = one(x, [130, 126], slack=1)
    assert len(sent) == 2
    h0, h1 = (wire.decode_header(p, K) for p in sent)
    s = 29                         # 2 workers: 2 * 2^29 <= 2^31 - 1
    assert (h0.slot, h0.round, h0.offset, h0.exp, h0.reason) == (0, 0, 0, 129, 130)
    assert (h1.slot, h1.round, h1.offset, h1.exp, h1.reason) == (1, 0, K, 127, 126)
    v0 = np.frombuffer(sent[0][HEADER_BYTES:], ">i4")
    assert v0[0] == 3 << (s - 3) and v0[1] == -(1 << (s - 3)) and not v0[2:].any()
    assert not np.frombuffer(sent[1][HEADER_BYTES:], ">i4").any()     # above its prediction
    # block 0: the max is 129 and 130 <= 129 + 1: a hit, its values count with exponent 130
    sums = np.zeros(K, np.int32)
    sums[0] = 5 << (s - 3)
    step = core.receive(answer(sent[0], 129, sums), 0.001)
    assert step.send == ()
    # block 1: the max is 128 (the other rank's 1.5), above the prediction: sent again
    step = core.receive(answer(sent[1], 128), 0.002)
    (again,) = step.send
    h = wire.decode_header(again, K)
    assert (h.slot, h.round, h.offset, h.exp, h.reason, h.flags) == (1, 1, K, 127, 128, 0)
    v1 = np.frombuffer(again[HEADER_BYTES:], ">i4")
    assert v1[0] == 3 << (s - 3) and not v1[1:].any()              # 0.75 * 2^(29-1)
    sums1 = np.zeros(K, np.int32)
    sums1[0] = 9 << (s - 3)                                           # 0.75 + 1.5
    assert core.receive(answer(again, 128, sums1), 0.003).send == ()
    res = core.result()
    assert res.tensor[0] == 5.0 and res.tensor[K] == 2.25
    assert res.exponents.tolist() == [130, 128] and res.maxima.tolist() == [129, 128]
    assert res.stats.misses == 1 and res.stats.packets_sent == 3


def test_all_zero_blocks_hit_whatever_is_predicted() -> None:
    """Every rank's block zero (max EXP_ZERO): a hit for any prediction, the exponent used
    EXP_ZERO; a predicted EXP_ZERO for a nonzero block is a miss."""
    x = np.zeros(2 * K, np.float32)
    x[K] = 1.0
    core, sent = one(x, [140, EXP_ZERO])
    assert wire.decode_header(sent[0], K).reason == 140
    assert wire.decode_header(sent[1], K).reason == EXP_ZERO
    assert not np.frombuffer(sent[1][HEADER_BYTES:], ">i4").any()
    assert core.receive(answer(sent[0], EXP_ZERO), 0.001).send == ()
    (again,) = core.receive(answer(sent[1], EXP_BIAS), 0.002).send
    assert wire.decode_header(again, K).reason == EXP_BIAS
    sums = np.zeros(K, np.int32)
    sums[0] = 1 << 29
    core.receive(answer(again, EXP_BIAS, sums), 0.003)
    res = core.result()
    assert res.exponents.tolist() == [EXP_ZERO, EXP_BIAS] and res.tensor[K] == 1.0


def test_a_switch_below_the_proposal_or_changing_its_max_is_caught() -> None:
    x = np.zeros(2 * K, np.float32)
    x[0], x[K] = 3.0, 3.0                     # proposals 129
    core, sent = one(x, [129, 120])
    with pytest.raises(AgreementError, match="below this worker's own proposal"):
        core.receive(answer(sent[0], 128), 0.001)
    core, sent = one(x, [129, 120])
    (again,) = core.receive(answer(sent[1], 130), 0.001).send      # a miss: sent with 130
    with pytest.raises(AgreementError, match="cannot"):
        core.receive(answer(again, 131), 0.002)


@pytest.mark.parametrize("predict, slack, match", [
    ([1], 0, "predict must be 2"), ([1, 256], 0, "0..255"), ([1.0, 2.0], 0, "predict"),
    ([1, 2], 9, "slack"), ([1, 2], -1, "slack")])
def test_bad_predictions(predict: list, slack: int, match: str) -> None:
    job = JobConfig(job_id=9, num_workers=2, num_slots=2, k=K)
    with pytest.raises(ValueError, match=match):
        WorkerCore(np.ones(2 * K, np.float32), job, predict=np.array(predict), slack=slack)


def test_without_predictions_byte_18_is_the_agreed_exponent() -> None:
    """The agreed scheme: a bootstrap use carries EXP_ZERO in byte 18, a data use the
    exponent the values are quantized with."""
    job = JobConfig(job_id=9, num_workers=2, num_slots=1, k=K)
    x = np.full(K, 3.0, np.float32)
    core = WorkerCore(x, job, FAST)
    (boot,) = core.start(0.0).send
    assert wire.decode_header(boot, K).reason == EXP_ZERO
    (data,) = core.receive(answer(boot, 131), 0.001).send
    h = wire.decode_header(data, K)
    assert (h.reason, h.exp) == (131, EXP_ZERO) and Flags(h.flags) == Flags.NONE


def test_ranks_predicting_differently_are_refused_never_summed() -> None:
    """Rank 2 predicts one binade above the others: each prediction alone would be a hit
    (slack 2), and without the switch's check the rounds would add integers of two scales
    into a sum every rank accepted.  The switch refuses the contributions whose qexp differs
    from their round's: the call fails on every rank, a refused rank naming QEXP, the others
    the refusal; no rank returns a sum."""
    n = 3
    xs = inputs(5, n, 32 * 12)
    m = maxima_of(xs)
    sw = OracleSwitch(k=K, members={5: list(range(n))}, num_slots={5: 4})
    net = Network(sw, LossyLink(np.random.default_rng(0)), LossyLink(np.random.default_rng(1)))
    job = JobConfig(job_id=5, num_workers=n, num_slots=4, k=K)
    cores = {r: WorkerCore(xs[r], job, FAST, rank=r, slack=2,
                           predict=np.minimum(m.astype(int) + (r == 2), 255))
             for r in range(n)}
    net.run(cores, keep_going=True)
    assert sorted(net.failures) == list(range(n))
    refused = [e for e in net.failures.values() if isinstance(e, RejectedError)]
    assert refused and all(e.reason == Reason.QEXP for e in refused)
    for e in net.failures.values():
        assert isinstance(e, (RejectedError, WorkerTimeoutError)), e
        if isinstance(e, WorkerTimeoutError):
            assert "QEXP" in str(e) or "exponent" in str(e), str(e)
    assert sw.refused.get(Reason.QEXP, 0) > 0
