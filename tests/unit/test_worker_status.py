"""Workers and the switch's STATUS replies: never a result, never a rejection, and the deadline
error names the ranks the switch said are missing (bit i = the i-th member = rank i), or says
that the switch said nothing.  Through tests/oracle.py, whose duplicate rule answers as
netsum.p4's reply_status does (tests/unit/test_netsum_p4_status.py checks the P4 side)."""
from __future__ import annotations

import numpy as np
import pytest
from oracle import LossyLink, Network, OracleSwitch

from netsum.wire import Flags, MsgType
from netsum.workers import wire
from netsum.workers.core import CoreState, JobConfig, Timing, WorkerCore
from netsum.workers.errors import WorkerTimeoutError
from netsum.workers.status import StatusBook

#: The K of every job here, given explicitly (not the default): the oracle switch and the
#: hand-made STATUS frames are at K=32.
K = 32
FAST = Timing(rto_initial=0.005, rto_min=0.002, rto_max=0.1, progress_deadline=2.0)


def network(n: int, slots: int, seed: int = 4) -> Network:
    rng = np.random.default_rng(seed)
    switch = OracleSwitch(k=K, members={5: list(range(n))}, num_slots={5: slots})
    return Network(switch, LossyLink(rng), LossyLink(rng))


@pytest.mark.parametrize("silent", [0, 1, 3])
def test_the_deadline_error_names_the_silent_rank(silent: int) -> None:
    """4 members, one never starts: the others' deadline errors name it, with the bitmap the
    switch last sent (the three others' bits)."""
    n, slots = 4, 8
    net = network(n, slots)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=K)
    cores = {i: WorkerCore(np.ones(2000, np.float32), job, FAST) for i in range(n) if i != silent}
    with pytest.raises(WorkerTimeoutError) as info:
        net.run(cores)
    bits = format(0b1111 & ~(1 << silent), "#06b")
    assert f"job 5: no contribution from rank {silent} (of 4) for 8 slots; last STATUS bitmap " \
           f"{bits} from the switch" in str(info.value)
    for c in cores.values():
        assert c.stats(net.now).rejected == 0 and c.stats(net.now).results == 0
        assert c.status.received > 0


def test_without_any_status_the_error_says_so() -> None:
    """The switch answers nothing (unreachable): no rank can be named, and the error says why."""
    n, slots = 2, 4
    net = network(n, slots)

    class Silent(OracleSwitch):
        def process(self, src: int, payload: bytes) -> list[tuple[int, bytes]]:
            return []

    net.switch = Silent(k=K, members={5: [0, 1]}, num_slots={5: slots})
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=K)
    cores = {i: WorkerCore(np.ones(500, np.float32), job, FAST) for i in range(n)}
    with pytest.raises(WorkerTimeoutError, match=r"job 5: no STATUS from the switch for any of "
                       r"the 4 waiting slots \(the switch unreachable, or not configured for "
                       r"this job\?\); no result for 2\.\d\ds"):
        net.run(cores)
    assert any(c.state is CoreState.FAILED for c in cores.values())   # the first to time out


def status_payload(slot: int, round_: int, bitmap: int, job: int = 5) -> bytes:
    head = wire.Header(msg_type=MsgType.STATUS, flags=Flags.NONE, job_id=job, slot=slot, exp=0,
                       count=bin(bitmap).count("1"), round=round_, offset=0)
    values = np.zeros(K, np.int32)
    values[0] = np.array([bitmap], np.uint32).view(np.int32)[0]
    return wire.encode(head, values, K)


def test_a_status_for_another_round_or_job_names_nobody() -> None:
    """Only a STATUS for the round a slot waits for counts; another job's is a rejection."""
    job = JobConfig(job_id=5, num_workers=3, num_slots=2, k=K)
    core = WorkerCore(np.ones(100, np.float32), job, FAST)
    core.start(0.0)
    core.receive(status_payload(0, 7, 0b001), 0.1)          # a round it does not wait for
    core.receive(status_payload(1, 0, 0b011), 0.2)          # slot 1's current round: rank 2
    core.receive(status_payload(0, 0, 0b001, job=6), 0.3)   # not this job's
    assert core.stats(0.3).rejected == 1 and core.status.received == 2
    with pytest.raises(WorkerTimeoutError, match=r"no contribution from rank 2 \(of 3\) for 1 "
                       r"slots; last STATUS bitmap 0b011 from the switch 1\.9 s ago"):
        core.tick(2.0 + 0.1)


def test_bits_map_to_ranks_and_the_most_missing_leads() -> None:
    book = StatusBook(4)
    for slot, bitmap in enumerate([0b0011, 0b0011, 0b1011, 0b0111]):
        book.note(status_payload(slot, 9, bitmap), 1.0)
    waiting = [(s, 9) for s in range(4)]
    assert book.missing(waiting) == {2: 3, 3: 3}
    assert book.explain(1, waiting, 1.5).startswith(
        "job 1: no contribution from ranks 2, 3 (of 4) for 3 slots; last STATUS bitmap 0b0111")
    book.note(status_payload(3, 9, 0b1111), 2.0)
    assert book.explain(1, waiting, 2.0).startswith(
        "job 1: no contribution from rank 2 (of 4) for 3 slots (also missing: rank 3 in 2); "
        "last STATUS bitmap 0b1111")
