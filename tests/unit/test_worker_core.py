"""workers.core: N worker cores wired through the test oracle (tests/oracle.py, a model of
netsum.p4's algorithm) over a fake link that loses, duplicates and reorders; exact sums within
the documented bound, statistics, the timeout error, and bad input."""
from __future__ import annotations

import numpy as np
import pytest
from oracle import LossyLink, Network, OracleSwitch

from workers import quant, wire
from workers.core import (ALLOWED_CALLS, TRANSITIONS, AgreementError, ChunkDone, CoreState,
                          DuplicateResult, Finished, JobConfig, Rejected, StaleResult, Timing,
                          WorkerCore)
from workers.errors import NonFiniteError, ProtocolStateError, QuantError, WorkerTimeoutError
from workers.protocol import HEADER_BYTES, Flags, MsgType

FAST = Timing(rto_initial=0.005, rto_min=0.002, rto_max=0.1, progress_deadline=2.0)


def make_net(seed: int, n: int, slots: int, k: int = 32, loss: float = 0.0, dup: float = 0.0,
             reorder: float = 0.0, job_id: int = 5) -> Network:
    rng = np.random.default_rng(seed)
    switch = OracleSwitch(k=k, members={job_id: list(range(n))}, num_slots={job_id: slots})
    # Worker->switch keeps each worker's packets in order (see LossyLink); switch->worker
    # reorders freely.  Both directions lose and duplicate.
    up = LossyLink(rng, loss=loss, dup=dup, reorder=reorder, fifo=True)
    down = LossyLink(rng, loss=loss, dup=dup, reorder=reorder)
    return Network(switch, up, down)


def inputs(seed: int, n: int, length: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + 1000)
    out = []
    for _ in range(n):
        x = rng.standard_normal(length) * 10.0 ** rng.uniform(-3, 3)
        x[rng.random(length) < 0.1] = 0.0
        out.append(x.astype(np.float32))
    return out


def check_exact(results: list, xs: list[np.ndarray]) -> None:
    true = np.sum([x.astype(np.float64) for x in xs], axis=0)
    first = results[0].tensor
    for r in results:
        assert np.array_equal(r.tensor, first), "workers disagree on the sum"
        err = np.abs(r.tensor.astype(np.float64) - true)
        assert (err <= r.bound + np.abs(true) * 2.0**-24 + 2.0**-150).all()


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
    check_exact(results, xs)
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
        assert sum(r.stats.duplicates + r.stats.stale for r in results) > 0
    else:
        assert all(r.stats.retransmissions == 0 for r in results)


def test_repeated_calls_thread_the_shadow_sets() -> None:
    """The switch keeps slot state between calls; next_sets carries the parity across."""
    n, slots = 3, 8
    net = make_net(1, n, slots, loss=0.1, dup=0.05, reorder=0.1)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots)
    sets = {i: None for i in range(n)}
    for call, length in enumerate([100, 1000, 33, 257]):
        xs = inputs(call, n, length)
        cores = {i: WorkerCore(xs[i], job, FAST, sets[i]) for i in range(n)}
        net.run(cores)
        results = [cores[i].result() for i in range(n)]
        check_exact(results, xs)
        sets = {i: results[i].next_sets for i in range(n)}
        assert len({r.next_sets for r in results}) == 1


def test_silent_peer_times_out_with_a_clear_error() -> None:
    job = JobConfig(job_id=5, num_workers=3, num_slots=4)
    net = make_net(2, 3, 4)
    cores = {i: WorkerCore(np.ones(500, np.float32), job, FAST) for i in range(2)}  # 3rd absent
    with pytest.raises(WorkerTimeoutError, match=r"job 5: no result for 2\.\d\ds .* 0/16 chunks "
                       r"done, 4 slots waiting .* 3 workers running"):
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
    job = JobConfig(job_id=5, num_workers=2, num_slots=4)
    net = make_net(3, 2, 4)

    class DyingSwitch(OracleSwitch):
        def process(self, src: int, payload: bytes) -> list[tuple[int, bytes]]:
            self.budget = getattr(self, "budget", 40) - 1
            return super().process(src, payload) if self.budget >= 0 else []

    net.switch = DyingSwitch(k=32, members={5: [0, 1]}, num_slots={5: 4})
    cores = {i: WorkerCore(np.ones(5000, np.float32), job, FAST) for i in range(2)}
    with pytest.raises(WorkerTimeoutError, match=r"chunks done"):
        net.run(cores)
    assert 0 < max(c.stats(net.now).chunks for c in cores.values()) < 157


def one_core(length: int = 100, slots: int = 2) -> tuple[WorkerCore, list[bytes]]:
    core = WorkerCore(np.ones(length, np.float32), JobConfig(5, 1, slots), FAST)
    return core, list(core.start(0.0).send)


def result_for(data: bytes, exp: int | None = None, **over: int) -> bytes:
    pkt = wire.decode(data, 32)
    h = pkt.header
    fields = dict(msg_type=MsgType.RESULT, flags=Flags.NONE, job_id=h.job_id, set=h.set,
                  slot=h.slot, exp=h.exp if exp is None else exp, count=1, offset=h.offset)
    fields.update(over)
    return wire.encode(wire.Header(**fields), pkt.values, 32)  # type: ignore[arg-type]


def test_single_worker_by_hand_events() -> None:
    core, boot = one_core(length=100, slots=2)  # 4 blocks on 2 slots
    assert [wire.decode(b, 32).header.offset for b in boot] == [0, 32]
    assert all(not wire.decode(b, 32).values.any() for b in boot)
    step = core.receive(result_for(boot[0]), 0.001)
    assert step.events == () and len(step.send) == 1        # bootstrap: no chunk yet
    data0 = step.send[0]
    h0 = wire.decode(data0, 32).header
    assert (h0.slot, h0.set, h0.offset) == (0, 1, 0)        # the set flipped
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
    core, boot = one_core()
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
    assert res.next_sets == (0, 0, 0, 0)  # slots 0,1 used twice (1,0 -> next 0); 2,3 unused
    assert core.tick(1.0).send == () and core.next_deadline() is None


def test_state_table_is_consistent() -> None:
    assert set(TRANSITIONS.values()) | {CoreState.IDLE} == set(CoreState)
    core, _ = one_core()
    with pytest.raises(ProtocolStateError, match="start"):
        core.start(0.0)
    with pytest.raises(ProtocolStateError, match="result"):
        core.result()
    fresh = WorkerCore(np.ones(3, np.float32), JobConfig(1, 1, 1))
    for call in ("receive", "tick"):
        assert CoreState.IDLE not in ALLOWED_CALLS[call]
    with pytest.raises(ProtocolStateError):
        fresh.receive(b"", 0.0)


def test_output_keeps_input_shape() -> None:
    core = WorkerCore(np.ones((3, 5), np.float32), JobConfig(5, 1, 1), FAST)
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
        WorkerCore(tensor, JobConfig(5, 2, 4))


@pytest.mark.parametrize("kwargs, match", [
    (dict(job_id=-1, num_workers=2, num_slots=4), "job_id"),
    (dict(job_id=1 << 16, num_workers=2, num_slots=4), "job_id"),
    (dict(job_id=1, num_workers=0, num_slots=4), "num_workers"),
    (dict(job_id=1, num_workers=33, num_slots=4), "num_workers"),
    (dict(job_id=1, num_workers=2, num_slots=0), "num_slots"),
    (dict(job_id=1, num_workers=2, num_slots=1 << 15 + 1), "num_slots"),
    (dict(job_id=1, num_workers=2, num_slots=4, k=48), "K must be"),
])
def test_bad_job(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        JobConfig(**kwargs)


def test_bad_sets_and_timing() -> None:
    with pytest.raises(ValueError, match="one per slot"):
        WorkerCore(np.ones(4, np.float32), JobConfig(1, 2, 4), sets=(0, 1))
    with pytest.raises(ValueError, match="one per slot"):
        WorkerCore(np.ones(4, np.float32), JobConfig(1, 2, 2), sets=(0, 2))
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
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots)
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
        WorkerCore(np.ones(4, np.float32), JobConfig(1, 2, 4), 0.05)  # type: ignore[arg-type]


@pytest.mark.parametrize("blocks_per_slot", [1, 2, 3])
def test_fresh_workers_resync_to_the_switch_sets(blocks_per_slot: int) -> None:
    """New worker processes (sets unknown, all 0) on a job whose previous call left slots on
    set 0 done: the switch replays the old result to their bootstrap; they must notice (a
    bootstrap answer is all zeros) and move to the other set, not adopt the old exponent."""
    n, slots = 3, 4
    net = make_net(21, n, slots, loss=0.05, reorder=0.1)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots)
    big = [x * 1e4 for x in inputs(1, n, 32 * slots * blocks_per_slot)]
    first = {i: WorkerCore(big[i], job, FAST) for i in range(n)}
    net.run(first)
    parity = first[0].result().next_sets
    small = [x * 1e-4 for x in inputs(2, n, 32 * slots * 2)]
    cores = {i: WorkerCore(small[i], job, FAST) for i in range(n)}   # sets forgotten
    net.run(cores)
    results = [cores[i].result() for i in range(n)]
    check_exact(results, small)
    stale = sum(s == 1 for s in parity)   # slots whose next set was 1, not the assumed 0
    assert all(r.stats.resyncs == stale for r in results)
    if blocks_per_slot % 2 == 0:
        assert stale == slots   # bootstrap + even number of blocks: last use on set 0
    # Precision is that of the new data: the agreed exponents come from the new tensors.
    props = np.maximum.reduce([quant.block_exponents(x, 32) for x in small])
    np.testing.assert_array_equal(results[0].exponents, props)


def test_timeout_names_the_last_rejection() -> None:
    """A switch built for another K answers with packets of the wrong size: the timeout says so."""
    core, boot = one_core()
    k64 = wire.encode(wire.decode(result_for(boot[0]), 32).header, np.zeros(64, np.int32), 64)
    step = core.receive(k64, 0.001)
    assert "is the P4 program built for K=32?" in step.events[0].reason  # type: ignore[union-attr]
    with pytest.raises(WorkerTimeoutError, match=r"1 packets rejected, last: .*64 values"):
        core.tick(FAST.progress_deadline + 1)
