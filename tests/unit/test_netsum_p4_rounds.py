"""netsum.p4's rounds, packet by packet: a contribution is never added twice and never lost,
whatever is lost, duplicated or reordered (docs/protocol.md, "What the switch guarantees").

Every expectation is worked out here from the inputs: the integer (int32 wrap-around) sum of
the one contribution per worker that each round must hold, and which packets the argument says
must be refused.  The last test lets a random network loose on the switch and checks every
RESULT it emits against those sums."""
from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from p4helpers import (Host, NetsumSwitch, netsum_config, netsum_frame, parse_frame, vec_sum,
                       worker_host, wrap32)
from netsum.wire import K_DEFAULT, Flags, MsgType

JOB = 4
SLOT_BASE = 8


def make_switch(n: int, num_slots: int = 4) -> tuple[NetsumSwitch, list[Host]]:
    sw = NetsumSwitch(netsum_config())
    hosts = [worker_host(i) for i in range(n)]
    sw.add_job(JOB, hosts, slot_base=SLOT_BASE, num_slots=num_slots)
    return sw, hosts


def idx(slot: int, round_: int) -> int:
    return (SLOT_BASE + slot) * 2 + (round_ & 1)


def values(worker: int, round_: int) -> list[int]:
    """A contribution that tells (worker, round) apart in every lane."""
    return [wrap32(1000 * round_ + 10 * worker + lane) for lane in range(K_DEFAULT)]


def data(h: Host, worker: int, round_: int, slot: int = 0, retx: bool = False) -> bytes:
    return netsum_frame(h, job_id=JOB, slot=slot, round=round_, values=values(worker, round_),
                        exp=100 + worker, flags=Flags.RETX if retx else 0)


def expected(n: int, round_: int) -> tuple[int, ...]:
    return vec_sum([values(w, round_) for w in range(n)])


def complete(sw: NetsumSwitch, hosts: list[Host], round_: int, slot: int = 0) -> None:
    out = []
    for w, h in enumerate(hosts):
        out = sw.send(h.port, data(h, w, round_, slot))
    assert len(out) == len(hosts), f"round {round_} did not complete"
    assert {parse_frame(f).values for _, f in out} == {expected(len(hosts), round_)}


def sums_held(sw: NetsumSwitch, slot: int, round_: int) -> tuple[int, ...]:
    return tuple(sw.register(f"val{lane:03d}", idx(slot, round_)) for lane in range(K_DEFAULT))


def test_the_reordered_old_duplicate_is_never_added() -> None:
    """The sequence that broke the set-bit scheme: worker A sends round u+2, then a delayed
    copy of its round-u+1 packet arrives.  It is not added to u+1's finished set: B, which
    lost u+1's result, still gets the right sum, and u+2 completes with its own sum."""
    sw, hosts = make_switch(2)
    a, b = hosts
    u = 4
    for r in range(u + 2):           # rounds 0 .. u+1 complete normally
        complete(sw, hosts, r)
    held = sums_held(sw, 0, u + 1)
    assert sw.send(a.port, data(a, 0, u + 2)) == []          # A moves on to u+2
    late = sw.send(a.port, data(a, 0, u + 1))                # the delayed copy of u+1
    # A duplicate of a finished round: answered to A alone with the stored result, not added.
    assert [p for p, _ in late] == [a.port]
    assert parse_frame(late[0][1]).values == expected(2, u + 1)
    assert sums_held(sw, 0, u + 1) == held
    assert sw.register("contributions", idx(0, u + 1)) == 2
    # B lost u+1's result and asks again: it gets the right sum.
    again = sw.send(b.port, data(b, 1, u + 1, retx=True))
    assert [p for p, _ in again] == [b.port]
    assert parse_frame(again[0][1]).values == expected(2, u + 1)
    assert parse_frame(again[0][1]).header["round"] == u + 1
    out = sw.send(b.port, data(b, 1, u + 2))
    assert {parse_frame(f).values for _, f in out} == {expected(2, u + 2)}
    assert sw.counter("drop_stale", JOB) == 0


def test_a_copy_older_than_the_held_round_is_stale() -> None:
    """Round u+2 started in u's set; a delayed copy of round u (same set) is refused and
    counted, the running round keeps its own contributions only."""
    sw, hosts = make_switch(3)
    u = 6
    for r in range(u + 2):
        complete(sw, hosts, r)
    assert sw.send(hosts[0].port, data(hosts[0], 0, u + 2)) == []
    for w in (0, 1, 2):              # old copies from everyone, w=1 and 2 not yet in u+2
        assert sw.send(hosts[w].port, data(hosts[w], w, u, retx=True)) == []
    assert sw.counter("drop_stale", JOB) == 3
    assert sw.register("held_round", idx(0, u)) == u + 2
    assert sw.register("bitmap", idx(0, u)) == 0b001
    assert sw.register("contributions", idx(0, u)) == 1
    out = []
    for w in (1, 2):
        out = sw.send(hosts[w].port, data(hosts[w], w, u + 2))
    assert {parse_frame(f).values for _, f in out} == {expected(3, u + 2)}


def test_a_newer_round_takes_the_set_over() -> None:
    """The first packet of round u+2 replaces round u's state (count, exponent, sums) instead of
    adding to it; round u+1, in the other set, is untouched."""
    sw, hosts = make_switch(2)
    for r in range(4):
        complete(sw, hosts, r)
    other = sums_held(sw, 0, 3)
    assert sw.send(hosts[1].port, data(hosts[1], 1, 4)) == []
    assert sw.register("held_round", idx(0, 4)) == 4
    assert sw.register("contributions", idx(0, 4)) == 1
    assert sw.register("max_exp", idx(0, 4)) == 101
    assert sw.register("done", idx(0, 4)) == 0
    assert sums_held(sw, 0, 4) == tuple(v & 0xFFFFFFFF for v in values(1, 4))
    assert sums_held(sw, 0, 3) == other


def test_lost_contribution_is_added_once_when_it_comes_again() -> None:
    """Loss of a DATA packet: the retransmission is the first copy to arrive and is added; the
    copy that was thought lost, arriving late, is a duplicate."""
    sw, hosts = make_switch(2)
    complete(sw, hosts, 0)
    assert sw.send(hosts[0].port, data(hosts[0], 0, 1)) == []
    # B's first copy is lost; its retransmission completes the round
    out = sw.send(hosts[1].port, data(hosts[1], 1, 1, retx=True))
    assert {parse_frame(f).values for _, f in out} == {expected(2, 1)}
    late = sw.send(hosts[1].port, data(hosts[1], 1, 1))
    assert [p for p, _ in late] == [hosts[1].port]
    assert parse_frame(late[0][1]).values == expected(2, 1)
    assert sw.register("contributions", idx(0, 1)) == 2


def test_rounds_compare_modulo_2_32() -> None:
    """A set holding round 2^32 - 2: round 0 (= 2^32) is newer and starts; 2^32 - 4 is older."""
    sw, hosts = make_switch(2)
    regs = sw.pipeline.registers
    i = idx(0, 0)
    regs["NetsumIngress.owner"].write(i, JOB)            # epoch 0, this job
    regs["NetsumIngress.held_round"].write(i, (1 << 32) - 2)
    regs["NetsumIngress.bitmap"].write(i, 0b11)
    assert sw.send(hosts[0].port, data(hosts[0], 0, (1 << 32) - 4)) == []
    assert sw.counter("drop_stale", JOB) == 1
    assert sw.register("held_round", i) == (1 << 32) - 2
    complete(sw, hosts, 0)
    assert sw.register("held_round", i) == 0


def test_set_of_another_epoch_is_started_only_by_a_first_round() -> None:
    """A packet of an earlier registration (round 5) reaching a set this epoch has not used
    yet is stale: only rounds 0 and 1 can start a registration's sets."""
    sw, hosts = make_switch(2)
    sw.set_epoch(JOB, 7)
    out = sw.send(hosts[0].port, data(hosts[0], 0, 5, slot=3))
    assert out == [] and sw.counter("drop_stale", JOB) == 1
    assert sw.register("bitmap", idx(3, 5)) == 0
    complete(sw, hosts, 1, slot=3)


# ---- everything at once: a random network in front of the switch ------------------------

@dataclass
class Worker:
    """The worker rule and nothing else: send round r + 1 of a slot only after accepting the
    result of round r; retransmit the current round's packet until its result comes."""
    index: int
    host: Host
    round: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    accepted: list[tuple[int, int]] = field(default_factory=list)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_loss_duplication_and_reordering(seed: int) -> None:
    """3 workers, 2 slots, 40 rounds each through a network that holds every packet in one pool
    and delivers a random one next (so anything overtakes anything, both directions), loses
    10 %, duplicates 10 % and keeps old copies around to replay.  Every RESULT the switch
    emits must be the exact sum of its round's contributions, and every round completes."""
    n, slots, rounds = 3, 2, 40
    rng = random.Random(seed)
    sw, hosts = make_switch(n, num_slots=slots)
    workers = [Worker(w, h) for w, h in enumerate(hosts)]
    pool: list[tuple[str, int, bytes]] = []      # ("up", worker, frame) / ("down", worker, ..)
    sent: list[tuple[int, bytes]] = []           # every DATA ever sent, for replays
    results = stale_before = statuses = 0

    def emit(w: Worker, slot: int, retx: bool = False) -> None:
        frame = data(w.host, w.index, w.round[slot], slot, retx)
        pool.append(("up", w.index, frame))
        sent.append((w.index, frame))

    for w in workers:
        for slot in range(slots):
            emit(w, slot)
    steps = 0
    while any(w.round[s] < rounds for w in workers for s in range(slots)):
        steps += 1
        assert steps < 50_000, "no progress"
        if not pool or rng.random() < 0.02:
            # timers: every worker retransmits what it waits for
            for w in workers:
                for slot in range(slots):
                    if w.round[slot] < rounds:
                        emit(w, slot, retx=True)
            continue
        if rng.random() < 0.05 and sent:
            # an old copy from anywhere in the past turns up again
            w_i, frame = rng.choice(sent)
            pool.append(("up", w_i, frame))
        way, w_i, frame = pool.pop(rng.randrange(len(pool)))
        if rng.random() < 0.10:
            continue                                         # lost
        if rng.random() < 0.10:
            pool.append((way, w_i, frame))                   # duplicated
        if way == "up":
            for port, out in sw.send(hosts[w_i].port, frame):
                p = parse_frame(out)
                if p.header["msg_type"] == MsgType.STATUS:
                    # a duplicate for a round still missing someone: the sender alone learns
                    # who contributed (its own bit among them); no sums, never accepted
                    bitmap = p.values[0] & 0xFFFFFFFF
                    assert port == hosts[w_i].port and bitmap >> w_i & 1 and bitmap < 1 << n
                    assert p.header["count"] == bin(bitmap).count("1") < n
                    statuses += 1
                    continue
                assert p.header["msg_type"] == MsgType.RESULT
                r = p.header["round"]
                assert p.values == expected(n, r), f"wrong sum for round {r}"
                assert p.header["exp"] == 100 + n - 1 and p.header["count"] == n
                results += 1
                pool.append(("down", port - 1, out))
            continue
        p = parse_frame(frame)
        w = workers[w_i]
        slot, r = p.header["slot"], p.header["round"]
        if r == w.round[slot] and r < rounds:               # the use in flight: accept it
            w.accepted.append((slot, r))
            w.round[slot] += 1
            if w.round[slot] < rounds:
                emit(w, slot)
    for w in workers:
        assert sorted(w.accepted) == [(s, r) for s in range(slots) for r in range(rounds)]
    assert results >= n * slots * rounds
    assert sw.counter("drop_stale", JOB) > stale_before      # late copies met newer rounds
    assert sw.counter("retransmissions", JOB) > 0
    assert statuses == sw.counter("status_out", JOB) > 0
