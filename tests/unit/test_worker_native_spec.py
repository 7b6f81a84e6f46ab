"""Speculative exponents (issue 23, docs/quantization.md) in the compiled worker core against
the Python reference: both cores of every worker (tests/unit/test_worker_native.py's `Twin`
and `BatchTwin`) given the same frames at the same virtual times over tests/oracle.py's
lossy network must send the same frames byte for byte -- a block's first use quantized with
its prediction (or zeros, where this rank's block is above it), its retry with the exponent
the switch returned, byte 18 (qexp) saying which -- and end with the same tensor, exponents,
maxima and statistics (misses included).

What the frames must carry is also checked against the inputs alone (not either core): the
max exponent M_b of each block computed from every rank's tensor (tests/exactsums.py), and
from it and the prediction P_b the rule of the design: a hit iff M_b == EXP_ZERO or
M_b <= P_b <= M_b + slack (then the block is quantized with P_b), else a miss (sent again
with M_b).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from exactsums import expected_sums
from oracle import LossyLink, Network, OracleSwitch
from test_worker_native import BatchTwin, Twin, net, tensors

from netsum.wire import EXP_ZERO, HEADER_BYTES, Flags, MsgType, Reason
from netsum.workers import wire
from netsum.workers.blocks import even_shards, plan_blocks
from netsum.workers.core import AgreementError, JobConfig, Step, Timing, WorkerCore
from netsum.workers.errors import RejectedError, WorkerTimeoutError
from netsum.workers.native import native_status

pytestmark = pytest.mark.skipif(not native_status()[0],
                                reason=f"no compiled worker core: {native_status()[1]}")

TIMING = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.05, progress_deadline=5.0)
_READ = wire.field_reader(("msg_type", "slot", "exp", "round", "offset", "reason"))


class Recording:
    """A twin whose sent DATA frames are kept (payloads, the reference's)."""

    def __init__(self, twin: Twin) -> None:
        self.twin = twin
        self.sent: list[bytes] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.twin, name)

    @property
    def py(self) -> WorkerCore:
        return self.twin.py

    def _keep(self, step: Step) -> Step:
        self.sent += step.send
        return step

    def start(self, now: float) -> Step:
        return self._keep(self.twin.start(now))

    def receive(self, payload: bytes, now: float) -> Step:
        return self._keep(self.twin.receive(payload, now))

    def tick(self, now: float) -> Step:
        return self._keep(self.twin.tick(now))


def maxima_of(xs: Sequence[np.ndarray], k: int, shards: Sequence[int] | None = None
              ) -> np.ndarray:
    """Per block of the plan, the max over ranks of the least biased e with 2^e >= max|x|
    (EXP_ZERO for a block of zeros), from the inputs: tests/exactsums.py's formula over each
    block's values padded with zeros to k."""
    plan = plan_blocks(len(xs[0]), k, shards)
    rows = [plan.rows(np.asarray(x, np.float32)) for x in xs]
    flat = [r.reshape(-1) for r in rows]
    return expected_sums(flat, k)[0]


def expected_qexp(pred: np.ndarray, maxima: np.ndarray, slack: int) -> tuple[np.ndarray,
                                                                               np.ndarray]:
    """(hit per block, the exponent each block's values end quantized with): the design's
    rule."""
    p, m = pred.astype(int), maxima.astype(int)
    hit = (m == EXP_ZERO) | ((m <= p) & (p <= m + slack))
    agreed = np.where(hit, np.where(m == EXP_ZERO, EXP_ZERO, p), m)
    return hit, agreed.astype(np.uint8)


def run_job(xs: Sequence[np.ndarray], job: JobConfig, timing: Timing, network: Network,
            rng: np.random.Generator, *, batched: bool, predict: np.ndarray | None = None,
            slack: int = 0, rounds: Sequence[Sequence[int] | None] | None = None,
            shards: Sequence[int] | None = None) -> dict[int, Recording]:
    """One call of every rank, both cores each; the twins (compared) with what they sent."""
    n = job.num_workers
    twins = {}
    for r in range(n):
        kw: dict[str, object] = {"predict": predict, "slack": slack}
        if shards is not None:
            kw.update(rank=r, shards=shards)
        start = None if rounds is None else rounds[r]
        if batched:
            prefix = rng.integers(0, 256, 14, dtype=np.uint8).tobytes()
            twin: Twin = BatchTwin(rng, xs[r], job, timing, start, prefix, **kw)
        else:
            twin = Twin(xs[r], job, timing, start, **kw)
        twins[r] = Recording(twin)
    network.run(twins)      # type: ignore[arg-type]
    for t in twins.values():
        compare(t.twin)
    return twins


def compare(t: Twin) -> None:
    """Twin.compare_results plus what speculation adds: maxima and misses."""
    t.compare_results()
    a, b = t.py.result(), t.nat.result()
    assert np.array_equal(a.maxima, b.maxima)
    assert a.stats.misses == b.stats.misses


def data_frames(sent: Sequence[bytes], k: int) -> dict[int, list[tuple[int, int]]]:
    """Per block offset: (round, qexp) of each distinct use sent (retransmissions folded)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for p in sent:
        msg, _slot, _exp, rnd, off, qexp = _READ(memoryview(p))
        uses = out.setdefault(off, [])
        if (rnd, qexp) not in uses:
            uses.append((rnd, qexp))
    return out


PREDICTIONS: dict[str, Callable[[np.ndarray, np.random.Generator], np.ndarray]] = {
    "hits": lambda m, rng: m.copy(),
    "below": lambda m, rng: np.where(m > 1, m - 1, m).astype(np.uint8),
    "above": lambda m, rng: np.where((m > 0) & (m < 250), m + 3, m).astype(np.uint8),
    "zero": lambda m, rng: np.zeros_like(m),
    "mix": lambda m, rng: np.clip(m.astype(int) + rng.choice([-1, 0, 0, 1, 2, 3, 200], len(m)),
                                  0, 255).astype(np.uint8),
}


@pytest.mark.parametrize("batched", [False, True], ids=["steps", "batches"])
@pytest.mark.parametrize("slack", [0, 2])
@pytest.mark.parametrize("kind", sorted(PREDICTIONS))
@pytest.mark.parametrize("n, slots, length, k, loss, dup, reorder", [
    (3, 4, 1000, 32, 0.0, 0.0, 0.0),            # fewer slots than blocks
    (4, 16, 3000, 32, 0.10, 0.05, 0.10),        # loss, duplicates, reordering
    (2, 64, 300, 32, 0.05, 0.05, 0.2),          # more slots than blocks
])
def test_speculation_sends_what_the_reference_sends(batched: bool, slack: int, kind: str,
                                                    n: int, slots: int, length: int, k: int,
                                                    loss: float, dup: float,
                                                    reorder: float) -> None:
    """Call 1 without a prediction (the agreed scheme) gives the maxima; call 2 predicts from
    them (as training does), altered per `kind`; both continue the rounds."""
    seed = n * 100 + slots + slack + len(kind)
    network = net(seed, n, slots, k, loss, dup, reorder)
    rng = np.random.default_rng(seed)
    xs = tensors(seed, n, length)
    xs[0][: 3 * k] = 0.0                       # a block of zeros everywhere: EXP_ZERO maxima
    for x in xs[1:]:
        x[: 3 * k] = 0.0
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=k)
    first = run_job(xs, job, TIMING, network, rng, batched=batched)
    got = first[0].py.result()
    want_max = maxima_of(xs, k)
    assert np.array_equal(got.maxima, want_max)
    assert got.stats.misses == 0
    pred = PREDICTIONS[kind](got.maxima, rng)
    # call 2: other values of the same magnitudes (the maxima stay), but rank 0's tensor is
    # 4x larger in two blocks (its proposals above the predictions there: zeros sent, a
    # miss for every rank)
    xs2 = [-x for x in xs]
    xs2[0][5 * k: 7 * k] *= 4.0
    rounds = [t.py.result().next_rounds for t in first.values()]
    second = run_job(xs2, job, TIMING, network, rng, batched=batched, predict=pred,
                     slack=slack, rounds=rounds)
    m2 = maxima_of(xs2, k)
    hit, agreed = expected_qexp(pred, m2, slack)
    nb = len(m2)
    for r, t in second.items():
        res = t.py.result()
        assert np.array_equal(res.maxima, m2)
        assert np.array_equal(res.exponents, agreed)
        assert res.stats.misses == int((~hit).sum())
        assert res.stats.bootstrap_packets == 0
        # per block: the first use carries P_b in byte 18; a miss then one use with M_b
        uses = data_frames(t.sent, k)
        plan = plan_blocks(length, k)
        for b in range(nb):
            q = [qexp for _rnd, qexp in uses[int(plan.starts[b])]]
            assert q == ([int(pred[b])] if hit[b] else [int(pred[b]), int(m2[b])]), b
    if kind == "hits":
        assert hit.sum() >= nb - 2
    if kind in ("below", "zero"):
        assert (~hit).sum() >= nb - 3 - 1      # every block but the zero ones (and rounding)


@pytest.mark.parametrize("batched", [False, True], ids=["steps", "batches"])
def test_legacy_byte_18_is_the_exponent_the_values_are_quantized_with(batched: bool) -> None:
    """Without a prediction: a bootstrap use carries EXP_ZERO in byte 18, the data use of
    block b the agreed exponent of b (from the inputs)."""
    n, k, slots, length = 3, 32, 8, 2000
    network = net(3, n, slots, k, 0.05, 0.05, 0.1)
    xs = tensors(3, n, length)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=k)
    twins = run_job(xs, job, TIMING, network, np.random.default_rng(3), batched=batched)
    want = maxima_of(xs, k)
    plan = plan_blocks(length, k)
    for t in twins.values():
        boot = data = 0
        for p in t.sent:
            msg, slot, _exp, rnd, off, qexp = _READ(memoryview(p))
            if rnd == 0:               # a slot's first use in the first call: the bootstrap
                assert qexp == EXP_ZERO
                boot += 1
            else:
                b = int(np.searchsorted(plan.starts, off))
                assert qexp == want[b], (b, qexp)
                data += 1
        assert boot >= slots and data >= plan.num_blocks


@pytest.mark.parametrize("batched", [False, True], ids=["steps", "batches"])
@pytest.mark.parametrize("slack", [0, 2])
def test_speculative_reduce_scatter(batched: bool, slack: int) -> None:
    """ACKs for the chunks another rank owns answer speculative uses as RESULTs do: a miss
    found by an ACK sends the block again all the same."""
    n, k, length, slots = 3, 32, 2000, 8
    network = net(19, n, slots, k, 0.1, 0.05, 0.1)
    xs = tensors(19, n, length)
    shards = even_shards(length, n)
    m = maxima_of(xs, k, shards)
    rng = np.random.default_rng(19)
    pred = np.clip(m.astype(int) + rng.choice([-2, -1, 0, 1, 2, 3], len(m)), 0,
                   255).astype(np.uint8)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=k)
    twins = run_job(xs, job, TIMING, network, rng, batched=batched, predict=pred,
                    slack=slack, shards=shards)
    hit, agreed = expected_qexp(pred, m, slack)
    assert not hit.all() and hit.any()
    for r, t in twins.items():
        res = t.py.result()
        assert np.array_equal(res.maxima, m)
        assert np.array_equal(res.exponents, agreed)
        assert res.stats.misses == int((~hit).sum())


def test_a_miss_goes_again_at_once_on_the_same_slot() -> None:
    """One worker, 2 slots, 4 blocks, every prediction one below (its blocks sent as zeros):
    block 0's result (a miss) sends block 0 again in the same call (not block 2), with M_0
    in byte 18 and the values quantized with it: the reference's integers."""
    k = 32
    x = np.linspace(-3.0, 5.0, 4 * k).astype(np.float32)
    job = JobConfig(5, 1, 2, k)
    m = maxima_of([x], k)
    t = Twin(x, job, TIMING, predict=m - 1)
    sent = t.start(0.0).send
    assert [_READ(memoryview(p))[4] for p in sent] == [0, k]    # blocks 0 and 1
    # each block above its prediction (the one worker's proposal is the max): zeros sent,
    # the prediction in byte 18, the proposal for the block itself in exp
    for b, p in enumerate(sent):
        assert not np.frombuffer(p[HEADER_BYTES:], ">i4").any()
        assert _READ(memoryview(p))[5] == m[b] - 1 and _READ(memoryview(p))[2] == m[b]
    switch = OracleSwitch(k=k, members={5: [0]}, num_slots={5: 2})
    (_, result), = switch.process(0, sent[0])
    again = t.receive(result, 0.001).send
    assert len(again) == 1
    msg, slot, exp, rnd, off, qexp = _READ(memoryview(again[0]))
    assert (slot, off, qexp, exp, rnd) == (0, 0, m[0], m[0], 1)
    shift = 30                                   # one worker: 2^30 * 1 < 2^31
    want = np.rint(x[:k].astype(np.float64) * 2.0 ** (shift - (int(m[0]) - 127)))
    assert np.array_equal(np.frombuffer(again[0][HEADER_BYTES:], ">i4"), want)


def _answer(data: bytes, exp: int, k: int = 32) -> bytes:
    """The RESULT of `data`'s round (a two-worker job) with max exponent `exp` and zeros."""
    h = wire.decode_header(data, k)
    return wire.encode(dataclasses.replace(h, msg_type=MsgType.RESULT, exp=exp, count=2),
                       np.zeros(k, np.int32), k)


def test_a_broken_max_is_the_same_error_in_both_cores() -> None:
    """A result below this worker's proposal for the block itself, and a retry's result that
    changes the max: both cores raise the reference's AgreementError, word for word."""
    k = 32
    x = np.zeros(2 * k, np.float32)
    x[0], x[k] = 3.0, 3.0                     # proposals 129
    job = JobConfig(job_id=9, num_workers=2, num_slots=2, k=k)
    t = Twin(x, job, TIMING, predict=np.array([129, 120]))
    sent = t.start(0.0).send
    with pytest.raises(AgreementError, match="below this worker's own proposal"):
        t.receive(_answer(sent[0], 128), 0.001)
    t = Twin(x, job, TIMING, predict=np.array([129, 120]))
    sent = t.start(0.0).send
    (again,) = t.receive(_answer(sent[1], 130), 0.001).send      # a miss: sent with 130
    assert _READ(memoryview(again))[5] == 130
    with pytest.raises(AgreementError, match="cannot"):
        t.receive(_answer(again, 131), 0.002)


def test_a_reject_sees_the_qexp_of_the_use_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """A REJECT goes from C to the Python core's refusal code (SLOW), which names the use in
    flight with the exponent its values are quantized with (`use["qexp"]`, what a QEXP
    refusal is checked against): read from the per-block arrays C writes in place, it must
    be byte 18 of the frame that use sent -- the prediction on a first use (slot 0), the
    max on a miss's retry (slot 1) -- in both cores alike."""
    from netsum.workers import acceptance
    seen: list[dict[str, int] | None] = []
    real = acceptance.applies

    def spy(fields: dict[str, int], **kw: object) -> bool:
        seen.append(kw["use"])  # type: ignore[arg-type]
        return real(fields, **kw)  # type: ignore[arg-type]
    monkeypatch.setattr(acceptance, "applies", spy)
    k = 32
    x = np.zeros(2 * k, np.float32)
    x[0], x[k] = 3.0, 3.0                     # proposals 129
    job = JobConfig(job_id=9, num_workers=2, num_slots=2, k=k)
    for slot in (0, 1):
        seen.clear()
        t = Twin(x, job, TIMING, predict=np.array([131, 120]))
        sent = t.start(0.0).send
        (again,) = t.receive(_answer(sent[1], 130), 0.001).send      # a miss: sent with 130
        frame = sent[0] if slot == 0 else again
        h = wire.decode_header(frame, k)
        # a refusal whose offset equals the use's: not this worker's (counted, no error)
        reject = wire.encode(dataclasses.replace(h, msg_type=MsgType.REJECT, flags=Flags.NONE,
                                                 reason=int(Reason.OFFSET)), None, k)
        assert t.receive(reject, 0.002).send == ()
        assert t.py.stats().rejected == t.nat.stats().rejected == 1
        want = {"round": h.round, "offset": h.offset, "dest": h.dest, "qexp": h.reason}
        assert seen == [want, want]           # the reference's, then the compiled core's
        assert h.reason == (131 if slot == 0 else 130)


@pytest.mark.parametrize("batched", [False, True], ids=["steps", "batches"])
def test_ranks_predicting_differently_fail_alike_in_both_cores(batched: bool) -> None:
    """Rank 2 predicts one binade above the others (each alone a hit with slack 2): the
    switch (tests/oracle.py models netsum.p4's qexp check) refuses the contributions whose
    qexp differs from their round's with REJECT(QEXP).  Through the compiled core's SLOW path
    the refusal is judged against the qexp of the use in flight (read from the arrays C
    writes): both cores of every rank fail the same way, word for word (Twin compares the
    errors), a refused rank with RejectedError naming QEXP; no rank returns a sum."""
    n, k, slots = 3, 32, 4
    xs = tensors(5, n, 32 * 12)
    m = maxima_of(xs, k)
    rng = np.random.default_rng(5)
    switch = OracleSwitch(k=k, members={5: list(range(n))}, num_slots={5: slots})
    network = Network(switch, LossyLink(rng), LossyLink(rng))
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=k)
    timing = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.05, progress_deadline=0.5)
    twins: dict[int, Twin] = {}
    for r in range(n):
        pred = np.minimum(m.astype(int) + (r == 2), 255)
        kw: dict[str, object] = {"rank": r, "slack": 2, "predict": pred}
        twins[r] = BatchTwin(rng, xs[r], job, timing, None, b"\x02" * 14, **kw) if batched \
            else Twin(xs[r], job, timing, **kw)
    network.run(twins, keep_going=True)     # type: ignore[arg-type]
    assert sorted(network.failures) == list(range(n))
    refused = [e for e in network.failures.values() if isinstance(e, RejectedError)]
    assert refused and all(e.reason == Reason.QEXP for e in refused)
    assert all(isinstance(e, (RejectedError, WorkerTimeoutError))
               for e in network.failures.values())
    assert switch.refused.get(Reason.QEXP, 0) > 0


@pytest.mark.parametrize("batched", [False, True], ids=["steps", "batches"])
@pytest.mark.parametrize("adaptive, hold", [(False, True), (True, False), (False, False)])
def test_predicted_calls_in_a_row_under_every_timer_mode(batched: bool, adaptive: bool,
                                                        hold: bool) -> None:
    """Three predicted calls of one registration (each from the previous one's maxima, +1
    with slack 2, as the training lanes do), the rounds continuing across misses, with the
    whole window (no cwnd) and/or every timer on its own, over a lossy network."""
    n, slots, length, k = 4, 16, 4000, 32
    network = net(41 + adaptive + 2 * hold, n, slots, k, 0.1, 0.05, 0.1)
    rng = np.random.default_rng(41)
    base = tensors(41, n, length)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=k)
    timing = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.05, progress_deadline=5.0,
                    adaptive=adaptive, hold_timers=hold)
    rounds: list[Sequence[int] | None] = [None] * n
    pred = maxima_of(base, k)
    for call in range(3):
        # each block's magnitude moves by -2..+1 binades from call to call
        moved = np.repeat(2.0 ** rng.integers(-2, 2, len(pred)), k)[:length]
        xs = [(x * moved).astype(np.float32) for x in base]
        p = np.minimum(pred.astype(int) + 1, 255).astype(np.uint8)
        twins = run_job(xs, job, timing, network, rng, batched=batched, predict=p, slack=2,
                        rounds=rounds)
        m = maxima_of(xs, k)
        hit, agreed = expected_qexp(p, m, 2)
        assert 0 < (~hit).sum() < len(m)
        for r, t in twins.items():
            res = t.py.result()
            assert np.array_equal(res.exponents, agreed) and np.array_equal(res.maxima, m)
            assert res.stats.misses == int((~hit).sum())
            rounds[r] = res.next_rounds
        pred = m
    assert sum(t.py.stats().retransmissions for t in twins.values()), "no loss exercised"
