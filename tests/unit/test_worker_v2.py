"""The worker core with protocol v2, on the virtual clock of tests/oracle.py (its switch model,
written from docs/protocol.md independently of the P4 program; test_worker_switch.py runs the
same cores against netsum.p4 itself):

* a member whose configuration disagrees with the job's (member count, K, tensor length,
  slots, collective) gets a named RejectedError at once; every other member ends with the
  exact sum or a named error (the refusal, from STATUS) -- never a wrong sum, never a bare
  timeout (issue 25 point 2);
* reduce-scatter: each rank gets its own shard, exact, and only its shard's values reach it;
* NONFINITE: the caller's per-block flags come back ORed over the ranks in `result.flags`.

Expectations come from the inputs (netsum.tensors' float64 reference and bound) and from what
each worker was told, never from what a core returned.
"""
from __future__ import annotations

import numpy as np
import pytest
from checks import assert_sum_of_inputs
from oracle import LossyLink, Network, OracleSwitch

from netsum.tensors import check_result, reference
from netsum.wire import HEADER_BYTES, Flags, Reason
from netsum.workers.blocks import even_shards, plan_blocks
from netsum.workers.core import JobConfig, Timing, WorkerCore
from netsum.workers.errors import RejectedError, WorkerTimeoutError

FAST = Timing(rto_initial=0.005, rto_min=0.002, rto_max=0.1, progress_deadline=1.0)
JOB = 1


def network(sw: OracleSwitch, seed: int, loss: float = 0.0) -> Network:
    rng = np.random.default_rng(seed)
    return Network(sw, LossyLink(rng, loss=loss, dup=loss / 2, reorder=0.1),
                   LossyLink(rng, loss=loss, dup=loss / 2, reorder=0.1))


def inputs(n: int, length: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(length) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
            for _ in range(n)]


# ---- refusals: one misconfigured member ---------------------------------------------------

def run_mismatch(n: int, jobs: dict[int, JobConfig], xs: list[np.ndarray], switch_k: int = 32,
                 slots: int = 8) -> tuple[Network, dict[int, WorkerCore], OracleSwitch]:
    sw = OracleSwitch(k=switch_k, members={JOB: list(range(n))}, num_slots={JOB: slots})
    net = network(sw, 1)
    right = JobConfig(JOB, n, slots, switch_k)
    cores = {r: WorkerCore(xs[r], jobs.get(r, right), FAST, rank=r) for r in range(n)}
    net.run(cores, keep_going=True)
    return net, cores, sw


def assert_never_wrong(net: Network, cores: dict[int, WorkerCore], xs: list[np.ndarray],
                       k: int) -> None:
    """Every member ended with a named error or the exact sum of everyone's inputs; a
    timeout names the refusal (the cause), not just a silent peer."""
    ok = [cores[r].result() for r in cores if r not in net.failures]
    if ok:
        assert_sum_of_inputs(ok, xs, k)
    for r, exc in net.failures.items():
        assert isinstance(exc, (RejectedError, WorkerTimeoutError)), (r, exc)
        if isinstance(exc, WorkerTimeoutError):
            assert "the switch refused rank" in str(exc), (r, str(exc))


def test_a_member_saying_8_workers_in_a_4_member_job() -> None:
    """issue 25's case: rank 0 started with --workers 8.  It fails at once naming both
    counts; the others time out naming rank 0's refusal; no one has a sum."""
    n, xs = 4, inputs(4, 1000)
    net, cores, sw = run_mismatch(n, {0: JobConfig(JOB, 8, 8, 32)}, xs)
    err = net.failures[0]
    assert isinstance(err, RejectedError) and err.reason == Reason.WORKERS
    assert "rank 0 says 8 workers, job 1 has 4" in str(err)
    assert sorted(net.failures) == [0, 1, 2, 3]
    for r in (1, 2, 3):
        text = str(net.failures[r])
        assert isinstance(net.failures[r], WorkerTimeoutError), text
        assert "the switch refused rank 0's DATA (WORKERS" in text
    assert sw.refused[Reason.WORKERS] >= 1 and sw.contributions > 0
    assert_never_wrong(net, cores, xs, 32)


def test_a_member_of_another_k() -> None:
    """A worker with K=64 against a K=32 switch (its frames have 64 values): REJECT(K)."""
    n = 3
    xs = inputs(n, 700)
    net, cores, _ = run_mismatch(n, {2: JobConfig(JOB, n, 8, 64)}, xs)
    err = net.failures[2]
    assert isinstance(err, RejectedError) and err.reason == Reason.K
    assert "this worker uses K=64, the switch K=32" in str(err)
    assert_never_wrong(net, cores, xs, 32)


def test_a_shorter_tensor_is_refused_not_summed_on_its_prefix() -> None:
    """Rank 3's tensor is 1000 elements, the others' 2000: v1 let rank 3 finish "exact on its
    own prefix" while the others failed.  Now whoever meets the other length first is
    refused with both lengths named, and nobody returns a sum."""
    n = 4
    xs = inputs(n, 2000, seed=3)
    short = list(xs)
    short[3] = xs[3][:1000]
    net, cores, _ = run_mismatch(n, {}, short)
    assert any(isinstance(e, RejectedError) and e.reason == Reason.LENGTH
               for e in net.failures.values())
    refused = [e for e in net.failures.values() if isinstance(e, RejectedError)]
    assert all(("1000 elements, the round recorded 2000" in str(e)) or
               ("2000 elements, the round recorded 1000" in str(e)) for e in refused)
    assert sorted(net.failures) == [0, 1, 2, 3]
    assert_never_wrong(net, cores, xs, 32)


@pytest.mark.parametrize("wrong_slots, reason", [(16, Reason.SLOT), (4, Reason.OFFSET)])
def test_a_member_with_another_slot_count(wrong_slots: int, reason: Reason) -> None:
    """More slots than the job's range: REJECT(SLOT) naming the job's 8.  Fewer: its blocks
    meet other members' blocks in the same (slot, round), which v1 summed into a wrong result
    that one of them accepted; now REJECT(OFFSET)."""
    n = 3
    xs = inputs(n, 32 * 40, seed=4)
    net, cores, _ = run_mismatch(n, {1: JobConfig(JOB, n, wrong_slots, 32)}, xs)
    reasons = {e.reason for e in net.failures.values() if isinstance(e, RejectedError)}
    assert reason in reasons, net.failures
    if reason is Reason.SLOT:
        assert "beyond job 1's 8" in str(net.failures[1])
    assert_never_wrong(net, cores, xs, 32)


def test_a_member_running_another_collective() -> None:
    """Rank 1 reduce-scatters while the others all-reduce: REJECT(DEST) for whoever meets the
    other's choice, named; no sum anywhere."""
    n = 3
    xs = inputs(n, 900, seed=5)
    sw = OracleSwitch(k=32, members={JOB: [0, 1, 2]}, num_slots={JOB: 8})
    net = network(sw, 2)
    job = JobConfig(JOB, n, 8, 32)
    cores = {r: WorkerCore(xs[r], job, FAST, rank=r,
                           shards=even_shards(900, n) if r == 1 else None) for r in range(n)}
    net.run(cores, keep_going=True)
    assert any(isinstance(e, RejectedError) and e.reason == Reason.DEST
               for e in net.failures.values())
    assert sorted(net.failures) == [0, 1, 2]


def test_agreeing_members_are_unaffected_by_the_checks() -> None:
    """With loss, duplication and reordering the checks refuse nothing and the sums are exact
    (a refusal counted here would be a false alarm)."""
    n = 4
    xs = inputs(n, 3000, seed=6)
    sw = OracleSwitch(k=32, members={JOB: list(range(n))}, num_slots={JOB: 16})
    net = network(sw, 3, loss=0.05)
    job = JobConfig(JOB, n, 16, 32)
    cores = {r: WorkerCore(xs[r], job, FAST, rank=r) for r in range(n)}
    net.run(cores)
    assert_sum_of_inputs([cores[r].result() for r in range(n)], xs, 32)
    assert sw.refused == {}


# ---- reduce-scatter ------------------------------------------------------------------------

@pytest.mark.parametrize("n, length, shards", [
    (4, 4000, None),                 # torch's layout: 1000 each
    (3, 1001, None),                 # 334, 334, 333: every shard ends in a padded block
    (4, 700, [300, 0, 250, 150]),    # an empty shard: rank 1 gets an empty tensor
])
def test_reduce_scatter_gives_each_rank_its_shard(n: int, length: int,
                                                  shards: list[int] | None) -> None:
    k = 32
    sh = even_shards(length, n) if shards is None else shards
    xs = inputs(n, length, seed=n)
    sw = OracleSwitch(k=k, members={JOB: list(range(n))}, num_slots={JOB: 16})
    got: dict[int, list[int]] = {r: [] for r in range(n)}   # payload sizes each rank received

    def count(node: int, payload: bytes) -> bytes:
        got[node].append(len(payload))
        return payload
    net = network(sw, 7, loss=0.05)
    net.tamper = count
    job = JobConfig(JOB, n, 16, k)
    cores = {r: WorkerCore(xs[r], job, FAST, rank=r, shards=sh) for r in range(n)}
    net.run(cores)
    plan = plan_blocks(length, k, sh)
    at = 0
    for r in range(n):
        res = cores[r].result()
        part = [x[at:at + sh[r]] for x in xs]
        assert res.tensor.shape == (sh[r],)
        if sh[r]:
            verdict = check_result(res.tensor, reference(part, k))
            assert verdict.ok, (r, verdict.problem)
        at += sh[r]
        # values reached this rank for its own blocks (and the zero bootstraps) only: every
        # other block's result was an ACK (the header alone)
        full = sum(1 for size in got[r] if size > HEADER_BYTES)
        own = int((plan.owners == r).sum())
        boot = min(16, plan.num_blocks)
        assert full >= own + boot
        assert full <= own + boot + res.stats.duplicates + res.stats.retransmissions
        assert sum(1 for size in got[r] if size == HEADER_BYTES) >= plan.num_blocks - own


# ---- NONFINITE -----------------------------------------------------------------------------

def test_nonfinite_flags_come_back_ored_per_block() -> None:
    """Rank 0 flags block 2, rank 2 flags block 5 (their tensors zeroed there, as the caller
    must): every rank's result says NONFINITE for blocks 2 and 5 exactly; the sums of the
    finite values are exact."""
    n, k, length = 3, 32, 320
    xs = inputs(n, length, seed=8)
    flags = [np.zeros(10, bool) for _ in range(n)]
    flags[0][2] = flags[2][5] = True
    sw = OracleSwitch(k=k, members={JOB: [0, 1, 2]}, num_slots={JOB: 4})
    net = network(sw, 9, loss=0.05)
    job = JobConfig(JOB, n, 4, k)
    cores = {r: WorkerCore(xs[r], job, FAST, rank=r, nonfinite=flags[r]) for r in range(n)}
    net.run(cores)
    results = [cores[r].result() for r in range(n)]
    want = np.zeros(10, np.uint8)
    want[[2, 5]] = int(Flags.NONFINITE)
    for res in results:
        np.testing.assert_array_equal(res.flags, want)
    assert_sum_of_inputs(results, xs, k)


def test_block_plan_maps_elements_and_blocks() -> None:
    """What a caller uses to build the flags: blocks of an all-reduce are K-runs; of a
    reduce-scatter, per shard."""
    plan = plan_blocks(100, 32)
    mask = np.zeros(100, bool)
    mask[[40, 99]] = True
    assert plan.any_per_block(mask).tolist() == [False, True, False, True]
    assert plan.per_element(np.array([0, 1, 0, 1]))[[31, 32, 63, 64, 96, 99]].tolist() == \
        [0, 1, 1, 0, 1, 1]
    rs = plan_blocks(100, 32, [50, 50])
    assert rs.starts.tolist() == [0, 32, 50, 82] and rs.owners.tolist() == [0, 0, 1, 1]
    assert rs.any_per_block(mask).tolist() == [False, True, False, True]
    assert rs.per_element(np.array([1, 0, 0, 2]))[[0, 31, 32, 49, 50, 82, 99]].tolist() == \
        [1, 1, 0, 0, 0, 2, 2]


def test_a_kept_all_reduce_plan_cannot_be_changed_by_one_caller() -> None:
    """All-reduce plans are kept across calls (one per length and K): their arrays are
    read-only, so no caller can move another call's blocks; the starts and sizes are the
    K-runs worked out by hand."""
    plan = plan_blocks(70, 32)
    assert plan_blocks(70, 32) is plan
    assert plan.starts.tolist() == [0, 32, 64] and plan.sizes.tolist() == [32, 32, 6]
    for arr in (plan.starts, plan.sizes, plan.owners):
        with pytest.raises(ValueError):
            arr[0] = 1
    assert plan_blocks(70, 64).starts.tolist() == [0, 64]


def test_a_reject_its_own_configuration_contradicts_does_not_stop_a_worker() -> None:
    """A frame forged from a member's own port draws a REJECT to that member (the switch knows
    members by port and addresses).  A correct worker checks the switch's claim against what
    it sends and goes on; the REJECT its configuration confirms fails it."""
    from netsum.workers import wire

    job = JobConfig(JOB, 4, 8, 32)
    core = WorkerCore(inputs(1, 32 * 20)[0], job, FAST, rank=1)
    core.start(0.0)                                    # slots 0..7 at round 0, bootstraps

    def reject(reason: Reason, **f: int) -> bytes:
        fields = dict(msg_type=wire.MsgType.REJECT, flags=wire.Flags.NONE, job_id=JOB, slot=3,
                      exp=0, count=0, round=0, offset=3 * 32, workers=4, dest=0xFF,
                      reason=int(reason), klog2=5, length=32 * 20)
        fields.update(f)
        return wire.encode(wire.Header(**fields), None, 32)  # type: ignore[arg-type]
    for payload in (reject(Reason.WORKERS, workers=4),          # its own count
                    reject(Reason.K, klog2=5),                  # its own K
                    reject(Reason.SLOT, slot=8),                # it uses slots 0..7 of 8
                    reject(Reason.LENGTH, length=640),          # its own length
                    reject(Reason.LENGTH, length=99, round=5),  # a round not in flight
                    reject(Reason.OFFSET, offset=96),           # the slot's own offset
                    reject(Reason.DEST, dest=0xFF)):            # its own dest
        core.receive(payload, 0.001)
    assert core.stats().rejected == 7 and core.state.value == "running"
    with pytest.raises(RejectedError, match="rank 1's tensor has 640 elements, the round "
                                            "recorded 99"):
        core.receive(reject(Reason.LENGTH, length=99), 0.002)
    assert core.state.value == "failed"


def test_an_ack_for_a_chunk_this_rank_owns_is_not_its_result() -> None:
    """Reduce-scatter: rank 0 owns the first shard.  An ACK (the header alone) for its own
    block in flight, or for a bootstrap use (whose zeros every rank checks), is not taken:
    the use stays in flight and the ACK is counted; the ACK of another rank's block is."""
    from netsum.workers import wire

    job = JobConfig(JOB, 2, 2, 32)
    core = WorkerCore(np.ones(128, np.float32), job, FAST, rank=0, shards=[64, 64])
    core.start(0.0)                  # slots 0, 1: bootstraps (blocks 0, 1 ahead)

    def result(slot: int, round_: int, offset: int, ack: bool) -> bytes:
        # the exponent agreed for the slot's next block (none after round 1: EXP_ZERO)
        head = wire.Header(msg_type=wire.MsgType.RESULT,
                           flags=wire.Flags.ACK if ack else wire.Flags.NONE, job_id=JOB,
                           slot=slot, exp=128 if round_ < 2 else 0, count=2, round=round_,
                           offset=offset,
                           workers=2, dest=0xFF, klog2=5, length=128)
        return wire.encode(head, None if ack else np.zeros(32, np.int32), 32)
    core.receive(result(0, 0, 0, ack=True), 0.001)          # bootstrap: needs its zeros
    assert core.stats().rejected == 1 and core.stats().results == 0
    core.receive(result(0, 0, 0, ack=False), 0.002)         # now slot 0 carries block 0
    core.receive(result(1, 0, 32, ack=False), 0.002)        # slot 1 carries block 1
    core.receive(result(0, 1, 0, ack=True), 0.003)          # block 0 is rank 0's own
    assert core.stats().rejected == 2 and core.stats().results == 2
    core.receive(result(0, 1, 0, ack=False), 0.004)
    core.receive(result(1, 1, 32, ack=False), 0.004)
    core.receive(result(0, 2, 64, ack=True), 0.005)         # block 2: rank 1's, an ACK
    core.receive(result(1, 2, 96, ack=True), 0.005)
    assert core.state.value == "done" and core.stats().rejected == 2
    assert core.result().tensor.shape == (64,)
