"""netsum.workers.core: N worker cores wired through the test oracle (tests/oracle.py, a model of
netsum.p4's algorithm) over a fake link that loses, duplicates and reorders; exact sums within
the documented bound, statistics, the timeout error, and bad input."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from exactsums import spread_inputs
from oracle import LossyLink, Network, OracleSwitch

from netsum.tensors import check_result, reference
from netsum.wire import HEADER_BYTES, Flags, MsgType
from netsum.workers import wire
from netsum.workers.core import (ALLOWED_CALLS, TRANSITIONS, AgreementError, ChunkDone, CoreState,
                          DuplicateResult, Finished, JobConfig, Rejected, StaleResult, Timing,
                          WorkerCore)
from netsum.workers.errors import (NonFiniteError, ProtocolStateError, QuantError, ResultError,
                            WorkerTimeoutError)

#: The K of every job here, given explicitly (not the default): the hand-made packets and
#: the sizes (4 blocks on 2 slots, 0/16 chunks) are counted in blocks of 32.
K = 32
FAST = Timing(rto_initial=0.005, rto_min=0.002, rto_max=0.1, progress_deadline=2.0)


def make_net(seed: int, n: int, slots: int, k: int = K, loss: float = 0.0, dup: float = 0.0,
             reorder: float = 0.0, job_id: int = 5) -> Network:
    rng = np.random.default_rng(seed)
    switch = OracleSwitch(k=k, members={job_id: list(range(n))}, num_slots={job_id: slots})
    # Both directions lose, duplicate and reorder freely (each worker's packets too).
    up = LossyLink(rng, loss=loss, dup=dup, reorder=reorder)
    down = LossyLink(rng, loss=loss, dup=dup, reorder=reorder)
    return Network(switch, up, down)


def inputs(seed: int, n: int, length: int) -> list[np.ndarray]:
    return spread_inputs(seed + 1000, n, length, decades=3)


def check_exact(results: list, xs: list[np.ndarray], k: int = K) -> None:
    """Within the bound the inputs give (agreed exponents = max of every worker's proposal),
    never the one the results carry; and the exponents the workers agreed are those."""
    ref = reference(xs, k)
    first = results[0].tensor
    for r in results:
        assert np.array_equal(r.tensor, first), "workers disagree on the sum"
        np.testing.assert_array_equal(r.exponents, ref.agreed)
        verdict = check_result(r.tensor, ref)
        assert verdict.ok, verdict.problem


CASES = [
    # n, slots, length, k, loss, dup, reorder
    (2, 4, 1000, 32, 0.0, 0.0, 0.0),
    (3, 8, 1001, 64, 0.0, 0.0, 0.0),
    (4, 16, 5000, 32, 0.10, 0.05, 0.10),
    (8, 32, 3000, 32, 0.10, 0.10, 0.20),
    (32, 8, 700, 32, 0.10, 0.05, 0.10),
    (5, 64, 40, 32, 0.10, 0.05, 0.10),      # fewer blocks than slots
    (2, 1, 500, 32, 0.20, 0.10, 0.30),      # one slot: strictly stop-and-wait
]


@pytest.mark.parametrize("n, slots, length, k, loss, dup, reorder", CASES)
def test_exact_sums_through_lossy_network(n: int, slots: int, length: int, k: int, loss: float,
                                          dup: float, reorder: float) -> None:
    net = make_net(n * 7 + slots, n, slots, k, loss, dup, reorder)
    xs = inputs(n, n, length)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=k)
    cores = {i: WorkerCore(xs[i], job, FAST) for i in range(n)}
    net.run(cores)
    results = [cores[i].result() for i in range(n)]
    check_exact(results, xs, k)
    assert net.switch.overflowed == 0
    nb = -(-length // k)
    for r in results:
        st = r.stats
        assert st.chunks == nb and st.bootstrap_packets == min(slots, nb)
        assert st.packets_sent == st.bootstrap_packets + st.chunks + st.retransmissions
        assert st.results == st.chunks + st.bootstrap_packets
        assert len(st.latencies) == nb and (st.latencies > 0).all()
    if loss:
        assert sum(r.stats.retransmissions for r in results) > 0
        assert net.uplink.lost + net.downlink.lost > 0
        if nb * n >= 500:  # enough packets that every impairment surely happened
            assert net.uplink.lost and net.downlink.lost and net.downlink.reordered
            assert net.uplink.duplicated and net.uplink.reordered
        # copies that are not the awaited result reached the workers: duplicated or stale
        # results, or STATUS replies to re-sent DATA (with few blocks, often only those)
        assert sum(r.stats.duplicates + r.stats.stale for r in results) + sum(
            c.status.received for c in cores.values()) > 0
        assert all(r.stats.rejected == 0 for r in results)     # STATUS is no rejection
    else:
        assert all(r.stats.retransmissions == 0 for r in results)


def test_repeated_calls_continue_the_rounds() -> None:
    """The switch keeps every slot's round between calls; next_rounds carries them across, so
    each call starts its slots one round past where the previous one left them."""
    n, slots = 3, 8
    net = make_net(1, n, slots, loss=0.1, dup=0.05, reorder=0.1)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=K)
    rounds: dict[int, tuple[int, ...] | None] = {i: None for i in range(n)}
    expect = [0] * slots
    for call, length in enumerate([100, 1000, 33, 257]):
        xs = inputs(call, n, length)
        cores = {i: WorkerCore(xs[i], job, FAST, rounds[i]) for i in range(n)}
        net.run(cores)
        results = [cores[i].result() for i in range(n)]
        check_exact(results, xs)
        nb = -(-length // K)
        w = min(slots, nb)
        for i in range(w):   # the bootstrap, then blocks i, i + w, ...
            expect[i] += 1 + len(range(i, nb, w))
        assert all(r.next_rounds == tuple(expect) for r in results)
        rounds = {i: results[i].next_rounds for i in range(n)}
    assert net.switch.stale > 0     # late duplicates met newer rounds and were refused


def test_new_registration_needs_a_new_epoch() -> None:
    """New workers (rounds unknown: all 0) on a job whose slots hold later rounds are refused
    as stale and time out; after the controller gives the job a new epoch they start afresh,
    with the precision of the new data (exponents agreed from the new tensors)."""
    n, slots = 3, 4
    net = make_net(21, n, slots, loss=0.05, reorder=0.1)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=K)
    big = [x * 1e4 for x in inputs(1, n, K * slots * 3)]
    net.run({i: WorkerCore(big[i], job, FAST) for i in range(n)})
    small = [x * 1e-4 for x in inputs(2, n, K * slots * 2)]
    with pytest.raises(WorkerTimeoutError):
        net.run({i: WorkerCore(small[i], job, FAST) for i in range(n)})
    net.switch.new_epoch(5)
    net.queue.clear()
    cores = {i: WorkerCore(small[i], job, FAST) for i in range(n)}
    net.run(cores)
    check_exact([cores[i].result() for i in range(n)], small)


def test_silent_peer_times_out_with_a_clear_error() -> None:
    job = JobConfig(job_id=5, num_workers=3, num_slots=4, k=K)
    net = make_net(2, 3, 4)
    cores = {i: WorkerCore(np.ones(500, np.float32), job, FAST) for i in range(2)}  # 3rd absent
    with pytest.raises(WorkerTimeoutError, match=r"job 5: no contribution from rank 2 \(of 3\) "
                       r"for 4 slots; last STATUS bitmap 0b011 from the switch \d\.\d s ago; no "
                       r"result for 2\.\d\ds .* 0/16 chunks done, 4 slots waiting .* 3 workers "
                       r"running"):
        net.run(cores)
    failed = [c for c in cores.values() if c.state is CoreState.FAILED]
    assert failed
    with pytest.raises(ProtocolStateError, match="not allowed in state failed"):
        failed[0].tick(net.now)
    with pytest.raises(ProtocolStateError):
        failed[0].result()
    # It kept retransmitting with backoff until the deadline.
    st = failed[0].stats(net.now)
    assert 4 * 3 < st.retransmissions < 4 * 2.0 / FAST.rto_min


def test_timeout_after_partial_progress() -> None:
    """Progress resets the deadline; a switch that dies midway still ends in a clear error."""
    job = JobConfig(job_id=5, num_workers=2, num_slots=4, k=K)
    net = make_net(3, 2, 4)

    class DyingSwitch(OracleSwitch):
        def process(self, src: int, payload: bytes) -> list[tuple[int, bytes]]:
            self.budget = getattr(self, "budget", 40) - 1
            return super().process(src, payload) if self.budget >= 0 else []

    net.switch = DyingSwitch(k=K, members={5: [0, 1]}, num_slots={5: 4})
    cores = {i: WorkerCore(np.ones(5000, np.float32), job, FAST) for i in range(2)}
    with pytest.raises(WorkerTimeoutError, match=r"chunks done"):
        net.run(cores)
    assert 0 < max(c.stats(net.now).chunks for c in cores.values()) < -(-5000 // K)


def one_core(length: int = 100, slots: int = 2) -> tuple[WorkerCore, list[bytes]]:
    core = WorkerCore(np.ones(length, np.float32), JobConfig(5, 1, slots, K), FAST)
    return core, list(core.start(0.0).send)


def result_for(data: bytes, exp: int | None = None, **over: int) -> bytes:
    pkt = wire.decode(data, K)
    h = pkt.header
    fields = dict(msg_type=MsgType.RESULT, flags=Flags.NONE, job_id=h.job_id, round=h.round,
                  slot=h.slot, exp=h.exp if exp is None else exp, count=1, offset=h.offset)
    fields.update(over)
    return wire.encode(wire.Header(**fields), pkt.values, K)  # type: ignore[arg-type]


def test_single_worker_by_hand_events() -> None:
    core, boot = one_core(length=100, slots=2)  # 4 blocks on 2 slots
    assert [wire.decode(b, K).header.offset for b in boot] == [0, K]
    assert all(not wire.decode(b, K).values.any() for b in boot)
    step = core.receive(result_for(boot[0]), 0.001)
    assert step.events == () and len(step.send) == 1        # bootstrap: no chunk yet
    data0 = step.send[0]
    h0 = wire.decode(data0, K).header
    assert (h0.slot, h0.round, h0.set, h0.offset) == (0, 1, 1, 0)   # the next round
    assert h0.exp == 127                                    # proposal for block 2 (ones)
    step = core.receive(result_for(data0), 0.003)
    assert isinstance(step.events[0], ChunkDone) and step.events[0].latency == pytest.approx(0.002)
    # The same result again is a duplicate; the old bootstrap result is stale now.
    assert isinstance(core.receive(result_for(data0), 0.004).events[0], DuplicateResult)
    assert isinstance(core.receive(result_for(boot[0]), 0.004).events[0], StaleResult)
    # A result with an agreed exponent below our own proposal is a broken switch.
    with pytest.raises(AgreementError, match="must return max"):
        core.receive(result_for(boot[1], exp=100), 0.005)


@pytest.mark.parametrize("payload, reason", [
    (b"short", "truncated"),
    (b"\x09" + bytes(HEADER_BYTES + 127), "msg_type 9"),
])
def test_garbage_is_rejected_not_fatal(payload: bytes, reason: str) -> None:
    core, _ = one_core()
    step = core.receive(payload, 0.0)
    assert isinstance(step.events[0], Rejected) and reason in step.events[0].reason
    assert core.stats().rejected == 1 and core.state is CoreState.RUNNING


def test_data_and_other_jobs_are_rejected() -> None:
    core, boot = one_core()
    assert isinstance(core.receive(boot[0], 0.0).events[0], Rejected)    # our own DATA
    other = result_for(boot[0], job_id=6)
    assert "job 6" in core.receive(other, 0.0).events[0].reason          # type: ignore[union-attr]
    stale = result_for(boot[0], slot=40)
    assert isinstance(core.receive(stale, 0.0).events[0], StaleResult)


def test_retransmission_sets_flag_and_backs_off() -> None:
    """Every due timer on its own (hold_timers off; the held timers' probe:
    tests/unit/test_worker_holdtimers.py)."""
    core = WorkerCore(np.ones(100, np.float32), JobConfig(5, 1, 2, K),
                      dataclasses.replace(FAST, hold_timers=False))
    boot = list(core.start(0.0).send)
    assert core.next_deadline() == pytest.approx(FAST.rto_initial)
    assert core.tick(0.001).send == ()
    step = core.tick(FAST.rto_initial)
    assert len(step.send) == 2
    for orig, retx in zip(boot, step.send):
        assert retx[1] == Flags.RETX and retx[:1] + retx[2:] == orig[:1] + orig[2:]
    assert core.next_deadline() == pytest.approx(FAST.rto_initial * 3)  # doubled


def test_finishes_and_reports() -> None:
    core, boot = one_core(length=40, slots=4)  # 2 blocks -> only 2 slots used
    assert len(boot) == 2
    pending = list(boot)
    events = []
    while pending:
        step = core.receive(result_for(pending.pop(0)), 0.01)
        pending += step.send
        events += step.events
    assert isinstance(events[-1], Finished) and core.state is CoreState.DONE
    res = core.result()
    np.testing.assert_array_equal(res.tensor, np.ones(40, np.float32))
    assert res.next_rounds == (2, 2, 0, 0)  # slots 0, 1 used twice (rounds 0, 1); 2, 3 unused
    assert core.tick(1.0).send == () and core.next_deadline() is None


def test_state_table_is_consistent() -> None:
    assert set(TRANSITIONS.values()) | {CoreState.IDLE} == set(CoreState)
    core, _ = one_core()
    with pytest.raises(ProtocolStateError, match="start"):
        core.start(0.0)
    with pytest.raises(ProtocolStateError, match="result"):
        core.result()
    fresh = WorkerCore(np.ones(3, np.float32), JobConfig(1, 1, 1, K))
    for call in ("receive", "tick"):
        assert CoreState.IDLE not in ALLOWED_CALLS[call]
    with pytest.raises(ProtocolStateError):
        fresh.receive(b"", 0.0)


def test_output_keeps_input_shape() -> None:
    core = WorkerCore(np.ones((3, 5), np.float32), JobConfig(5, 1, 1, K), FAST)
    pending = list(core.start(0.0).send)
    while pending:
        pending += core.receive(result_for(pending.pop(0)), 0.0).send
    assert core.result().tensor.shape == (3, 5)


@pytest.mark.parametrize("tensor, exc, match", [
    (np.zeros(4, np.int64), QuantError, "dtype int64"),
    (np.zeros(0, np.float32), QuantError, "empty"),
    (np.array([1.0, np.nan], np.float32), NonFiniteError, "offset 1"),
])
def test_bad_tensor(tensor: np.ndarray, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        WorkerCore(tensor, JobConfig(5, 2, 4, K))


@pytest.mark.parametrize("kwargs, match", [
    (dict(job_id=-1, num_workers=2, num_slots=4), "job_id"),
    (dict(job_id=1 << 16, num_workers=2, num_slots=4), "job_id"),
    (dict(job_id=1, num_workers=0, num_slots=4), "num_workers"),
    (dict(job_id=1, num_workers=33, num_slots=4), "num_workers"),
    (dict(job_id=1, num_workers=2, num_slots=0), "num_slots"),
    (dict(job_id=1, num_workers=2, num_slots=1 << 16), "num_slots"),
    (dict(job_id=1, num_workers=2, num_slots=4, k=48), "K must be"),
])
def test_bad_job(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        JobConfig(**kwargs)


def test_bad_rounds_and_timing() -> None:
    with pytest.raises(ValueError, match="one per slot"):
        WorkerCore(np.ones(4, np.float32), JobConfig(1, 2, 4, K), rounds=(0, 1))
    with pytest.raises(ValueError, match="one per slot"):
        WorkerCore(np.ones(4, np.float32), JobConfig(1, 2, 2, K), rounds=(0, -1))
    with pytest.raises(ValueError, match="one per slot"):
        WorkerCore(np.ones(4, np.float32), JobConfig(1, 2, 2, K), rounds=(0, 1 << 32))
    for bad in (True, 1.0, "1", None):      # integers only (a bool is not a round)
        with pytest.raises(ValueError, match="one per slot"):
            WorkerCore(np.ones(4, np.float32), JobConfig(1, 2, 2, K), rounds=(0, bad))
    last = (1 << 32) - 1                    # the largest round a slot can be at
    core = WorkerCore(np.ones(4, np.float32), JobConfig(1, 2, 2, K), rounds=[last, 0])
    assert core.next_rounds() == (last, 0)
    with pytest.raises(ValueError, match="rto_min"):
        Timing(rto_initial=0.001, rto_min=0.01)
    with pytest.raises(TypeError, match="JobConfig"):
        WorkerCore(np.ones(4, np.float32), (1, 2, 4))  # type: ignore[arg-type]


def congested_run(adaptive: bool) -> tuple[list, Network]:
    """4 workers with a 256-slot window into a switch serving 20k packets/s from a 64-packet
    queue: the initial burst overflows the queue, as with the Python switch's socket buffers."""
    n, slots = 4, 256
    net = make_net(11, n, slots)
    net.switch_rate, net.queue_limit = 20_000.0, 64
    xs = inputs(11, n, 12_000)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=K)
    timing = Timing(rto_initial=0.02, rto_min=0.002, rto_max=0.5, adaptive=adaptive)
    cores = {i: WorkerCore(xs[i], job, timing) for i in range(n)}
    net.run(cores)
    results = [cores[i].result() for i in range(n)]
    check_exact(results, xs)
    return results, net


def test_adaptive_window_backs_off_under_congestion() -> None:
    fixed, net_fixed = congested_run(adaptive=False)
    aimd, net_aimd = congested_run(adaptive=True)
    assert net_fixed.queue_drops > 0 and net_aimd.queue_drops > 0
    retx_fixed = sum(r.stats.retransmissions for r in fixed)
    retx_aimd = sum(r.stats.retransmissions for r in aimd)
    assert retx_aimd < retx_fixed / 2, (retx_aimd, retx_fixed)
    assert max(r.stats.elapsed for r in aimd) <= max(r.stats.elapsed for r in fixed)


def test_timing_must_be_timing() -> None:
    with pytest.raises(TypeError, match="Timing"):
        WorkerCore(np.ones(4, np.float32), JobConfig(1, 2, 4, K), 0.05)  # type: ignore[arg-type]


def test_rounds_wrap_modulo_2_32() -> None:
    """A slot whose round counter is at 2^32 - 1 goes on at 0 (the switch compares modulo
    2^32, so 0 is newer than 2^32 - 1)."""
    n, slots = 2, 2
    net = make_net(5, n, slots)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=K)
    xs = inputs(3, n, K * slots * 2)
    start = ((1 << 32) - 2, (1 << 32) - 1)
    cores = {i: WorkerCore(xs[i], job, FAST, start) for i in range(n)}
    net.switch.state.clear()
    # The oracle refuses a set's first round above 1 (another epoch); these sets are this
    # epoch's and already hold the two rounds before: seed them.
    for slot, r in enumerate(start):
        for back in (1, 2):
            s = net.switch._set(5, slot, (r - back) & 1)
            s.round, s.bitmap, s.done = (r - back) % (1 << 32), 0b11, True
    net.run(cores)
    results = [cores[i].result() for i in range(n)]
    check_exact(results, xs)
    assert results[0].next_rounds == (1, 2)


def test_nonzero_bootstrap_result_is_a_broken_switch() -> None:
    """Every bootstrap carries zeros: a nonzero sum means the switch added something that was
    not sent for this round."""
    core, boot = one_core()
    pkt = wire.decode(boot[0], K)
    bad = wire.encode(wire.Header(msg_type=MsgType.RESULT, flags=Flags.NONE, job_id=5,
                                  slot=pkt.header.slot, exp=pkt.header.exp, count=1,
                                  round=pkt.header.round, offset=pkt.header.offset),
                      np.eye(1, K, 3, dtype=np.int32)[0], K)
    with pytest.raises(ResultError, match="bootstrap result .* is not zero"):
        core.receive(bad, 0.001)


def test_exponent_where_nothing_follows_must_be_zero() -> None:
    """The last use of each slot proposes for no block: everyone sends EXP_ZERO, so the agreed
    exponent is EXP_ZERO; anything else is a switch that does not compute max(exp)."""
    core, boot = one_core(length=64, slots=2)      # 2 blocks on 2 slots
    data = core.receive(result_for(boot[0]), 0.001).send[0]
    assert wire.decode(data, K).header.exp == 0
    with pytest.raises(AgreementError, match="every worker proposed 0"):
        core.receive(result_for(data, exp=128), 0.002)


def test_timeout_names_the_last_rejection() -> None:
    """A switch built for another K answers with packets of the wrong size: the timeout says so."""
    core, boot = one_core()
    k64 = wire.encode(wire.decode(result_for(boot[0]), K).header, np.zeros(64, np.int32), 64)
    step = core.receive(k64, 0.001)
    assert f"is the P4 program built for K={K}?" in step.events[0].reason  # type: ignore[union-attr]
    with pytest.raises(WorkerTimeoutError, match=r"1 packets rejected, last: .*64 values"):
        core.tick(FAST.progress_deadline + 1)


def test_status_frames_are_neither_results_nor_rejections() -> None:
    """STATUS frames of this job for the very use in flight (the switch echoes the DATA's
    job, slot, round and offset, lane 0 the bitmap) come between the results: the sums are
    those of the inputs, nothing is rejected, each STATUS is counted and handed to the hook;
    a STATUS of another job is rejected as any other job's packet."""
    k, job = 32, JobConfig(7, 1, 4, 32)
    x = np.arange(1, 12 * k + 1, dtype=np.float32)
    seen: list[tuple[int, int]] = []

    class Core(WorkerCore):
        def on_status(self, payload: memoryview) -> None:
            at = wire.field_offset("slot")
            seen.append((int.from_bytes(payload[at:at + 2], "big"),
                         int.from_bytes(payload[HEADER_BYTES:HEADER_BYTES + 4], "big")))

    core = Core(x, job, Timing(progress_deadline=5.0))
    size = core.packet_bytes
    rx = [memoryview(bytearray(size)) for _ in range(16)]
    todo = list(core.start_frames(0.0))
    statuses = others = 0
    now = 0.0
    while todo:
        now += 1e-4
        batch: list[bytes] = []
        for i in todo:
            data = bytes(core.frames[i])
            result = bytearray(data)
            result[0], result[7] = MsgType.RESULT, 1
            status = bytearray(data)
            status[0], status[7] = 3, 0
            status[HEADER_BYTES:HEADER_BYTES + 4] = (1).to_bytes(4, "big")   # bitmap: rank 0
            foreign = bytearray(status)
            foreign[2:4] = (8).to_bytes(2, "big")                            # job 8
            batch += [bytes(status), bytes(result)]
            statuses += 1
            if others < 2:
                batch.append(bytes(foreign))
                others += 1
        todo = []
        for at in range(0, len(batch), len(rx)):
            part = batch[at:at + len(rx)]
            for j, p in enumerate(part):
                rx[j][:] = p
            todo += core.receive_frames(rx, len(part), now)
    assert core.state is CoreState.DONE
    assert core.status_frames == statuses and len(seen) == statuses
    assert all(bitmap == 1 for _, bitmap in seen)
    st = core.stats()
    assert st.rejected == 2 and st.duplicates == 0 and st.stale == 0
    # One worker: the sum is its own tensor, exactly (quantized with the max exponent).
    np.testing.assert_allclose(core.result().tensor, x, rtol=2 ** -20)
