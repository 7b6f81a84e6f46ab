"""netsum.p4 on the embedded switch: aggregation at a single (root) switch, packet by packet.

Frames in, frames out: every expected value is computed here from the inputs (int32 wrap-around
sums, max exponent), never read back from the switch.
"""
from __future__ import annotations

import random
from typing import Sequence

import pytest

from p4helpers import (INT32_MAX, INT32_MIN, SERVICE_IP, data_fields, SERVICE_MAC, Host, NetsumSwitch, Parsed,
                       netsum_config, netsum_frame, parse_frame, vec_sum, worker_host, wrap32)
from netsum.wire import K_DEFAULT, K_SUPPORTED, UDP_PORT, Flags, MsgType

JOB = 3


def rand_values(rng: random.Random, k: int = K_DEFAULT) -> list[int]:
    # Mix of extremes (to exercise wrap-around) and ordinary values.
    return [rng.choice((INT32_MIN, INT32_MAX, -1, 0, 1)) if rng.random() < 0.2
            else rng.randint(INT32_MIN, INT32_MAX) for _ in range(k)]


def make_switch(n: int, k: int = K_DEFAULT, **job_kw: int) -> tuple[NetsumSwitch, list[Host]]:
    sw = NetsumSwitch(netsum_config(k))
    hosts = [worker_host(i) for i in range(n)]
    sw.add_job(JOB, hosts, **job_kw)
    return sw, hosts


def reg_index(slot_base: int, slot: int, set_: int) -> int:
    return (slot_base + slot) * 2 + set_


def check_result(p: Parsed, *, to: Host, job: int, slot: int, round_: int, exp: int, count: int,
                 values: Sequence[int], offset: int = 0) -> None:
    assert (p.eth_src, p.ip_src, p.sport) == (SERVICE_MAC, SERVICE_IP, UDP_PORT)
    assert (p.eth_dst, p.ip_dst, p.dport) == (to.mac, to.ip, to.udp_port)
    assert p.ip_checksum_ok
    assert p.udp_checksum == 0
    assert p.header == {"msg_type": MsgType.RESULT, "flags": 0, "job_id": job, "round": round_,
                        "slot": slot, "exp": exp, "count": count, "offset": offset,
                        **data_fields(job, len(values))}
    assert p.values == tuple(values)


def test_first_middle_last_contribution() -> None:
    sw, hosts = make_switch(3, slot_base=4)
    rng = random.Random(1)
    vecs = [rand_values(rng) for _ in hosts]
    exps = [120, 131, 127]
    idx = reg_index(4, 2, 1)

    # first: initialises the slot, nothing leaves the switch
    out = sw.send(1, netsum_frame(hosts[0], job_id=JOB, slot=2, round=1, values=vecs[0],
                                  exp=exps[0], offset=64))
    assert out == []
    assert sw.register("bitmap", idx) == 0b001
    assert sw.register("contributions", idx) == 1
    assert sw.register("max_exp", idx) == 120
    assert sw.register("done", idx) == 0
    assert sw.register("val000", idx) == vecs[0][0] & 0xFFFFFFFF

    # middle: adds, still nothing out
    out = sw.send(2, netsum_frame(hosts[1], job_id=JOB, slot=2, round=1, values=vecs[1],
                                  exp=exps[1], offset=64))
    assert out == []
    assert sw.register("bitmap", idx) == 0b011
    assert sw.register("contributions", idx) == 2
    assert sw.register("max_exp", idx) == 131
    assert sw.register("val031", idx) == wrap32(vecs[0][31] + vecs[1][31]) & 0xFFFFFFFF
    # the other set of the slot is untouched
    assert sw.register("contributions", reg_index(4, 2, 0)) == 0

    # last: the result is multicast to every member
    out = sw.send(3, netsum_frame(hosts[2], job_id=JOB, slot=2, round=1, values=vecs[2],
                                  exp=exps[2], offset=64))
    assert sorted(port for port, _ in out) == [1, 2, 3]
    expected = vec_sum(vecs)
    for port, frame in out:
        check_result(parse_frame(frame), to=hosts[port - 1], job=JOB, slot=2, round_=1, exp=131,
                     count=3, values=expected, offset=64)
    assert sw.register("done", idx) == 1
    assert sw.counter("pkts_in", JOB) == 3
    assert sw.counter("results_out", JOB) == 3


@pytest.mark.parametrize("n", [2, 3, 8, 32])
def test_multicast_result_contents(n: int) -> None:
    sw, hosts = make_switch(n)
    rng = random.Random(n)
    vecs = [rand_values(rng) for _ in hosts]
    exps = [rng.randint(1, 255) for _ in hosts]
    order = list(range(n))
    rng.shuffle(order)
    for i in order[:-1]:
        assert sw.send(hosts[i].port, netsum_frame(hosts[i], job_id=JOB, slot=5, round=0,
                                                   values=vecs[i], exp=exps[i])) == []
    last = order[-1]
    out = sw.send(hosts[last].port, netsum_frame(hosts[last], job_id=JOB, slot=5, round=0,
                                                 values=vecs[last], exp=exps[last]))
    assert sorted(p for p, _ in out) == sorted(h.port for h in hosts)
    for port, frame in out:
        check_result(parse_frame(frame), to=hosts[port - 1], job=JOB, slot=5, round_=0,
                     exp=max(exps), count=n, values=vec_sum(vecs))


def test_single_worker_job_returns_its_own_values() -> None:
    sw, hosts = make_switch(1)
    vals = list(range(-(K_DEFAULT // 2), K_DEFAULT // 2))
    out = sw.send(1, netsum_frame(hosts[0], job_id=JOB, slot=0, values=vals, exp=9))
    assert len(out) == 1
    check_result(parse_frame(out[0][1]), to=hosts[0], job=JOB, slot=0, round_=0, exp=9, count=1,
                 values=vals)


@pytest.mark.parametrize("exps, expected", [
    ([0, 0, 0], 0),                 # all-zero blocks: 0 is the identity of max
    ([5, 130, 7], 130),
    ([255, 1, 0], 255),
    ([127, 127, 126], 127),
])
def test_exponent_is_max_over_contributors(exps: list[int], expected: int) -> None:
    sw, hosts = make_switch(3)
    out: list[tuple[int, bytes]] = []
    for h, e in zip(hosts, exps):
        out = sw.send(h.port, netsum_frame(h, job_id=JOB, slot=1, values=[1] * K_DEFAULT, exp=e))
    assert len(out) == 3
    assert {parse_frame(f).header["exp"] for _, f in out} == {expected}


def test_duplicate_before_completion_is_not_added() -> None:
    """Answered with a STATUS to the sender alone (tests/unit/test_netsum_p4_status.py), never
    added."""
    sw, hosts = make_switch(3)
    vecs = [[i + 1] * K_DEFAULT for i in range(3)]
    assert sw.send(1, netsum_frame(hosts[0], job_id=JOB, slot=0, values=vecs[0])) == []
    # the retransmission carries different values: they must not be added
    status = sw.send(1, netsum_frame(hosts[0], job_id=JOB, slot=0, values=[1000] * K_DEFAULT,
                                     flags=Flags.RETX))
    again = sw.send(1, netsum_frame(hosts[0], job_id=JOB, slot=0, values=vecs[0]))
    for out in (status, again):
        assert [port for port, _ in out] == [1]
        assert parse_frame(out[0][1]).header["msg_type"] == MsgType.STATUS
    assert sw.counter("retransmissions", JOB) == 2
    assert sw.register("contributions", 0) == 1
    assert sw.send(2, netsum_frame(hosts[1], job_id=JOB, slot=0, values=vecs[1])) == []
    out = sw.send(3, netsum_frame(hosts[2], job_id=JOB, slot=0, values=vecs[2]))
    assert len(out) == 3
    assert parse_frame(out[0][1]).values == (6,) * K_DEFAULT
    assert parse_frame(out[0][1]).header["count"] == 3


def test_duplicate_after_completion_gets_unicast_result() -> None:
    sw, hosts = make_switch(3)
    rng = random.Random(7)
    vecs = [rand_values(rng) for _ in hosts]
    for h, v in zip(hosts, vecs):
        sw.send(h.port, netsum_frame(h, job_id=JOB, slot=9, round=1, values=v, exp=100 + h.port,
                                     offset=4096))
    # worker 1 lost its copy and retransmits (with stale values): only it gets the result
    out = sw.send(2, netsum_frame(hosts[1], job_id=JOB, slot=9, round=1, values=[7] * K_DEFAULT,
                                  exp=1, flags=Flags.RETX, offset=4096))
    assert [p for p, _ in out] == [2]
    check_result(parse_frame(out[0][1]), to=hosts[1], job=JOB, slot=9, round_=1, exp=103, count=3,
                 values=vec_sum(vecs), offset=4096)
    assert sw.counter("retransmissions", JOB) == 1
    assert sw.counter("results_out", JOB) == 4


def test_shadow_sets_across_many_rounds() -> None:
    """Rounds of a slot alternate sets (round & 1); the previous round's result stays available
    to a worker that lost it, even after the others started the next round in the other set,
    and nothing of that late retransmission is added anywhere."""
    n, rounds, slots = 3, 12, 2
    sw, hosts = make_switch(n, slot_base=10, num_slots=slots)
    rng = random.Random(42)
    prev: dict[int, tuple[int, ...]] = {}
    for r in range(rounds):
        for slot in range(slots):
            vecs = [rand_values(rng) for _ in hosts]
            exps = [rng.randint(0, 255) for _ in hosts]
            order = list(range(n))
            rng.shuffle(order)
            out: list[tuple[int, bytes]] = []
            for pos, i in enumerate(order):
                out = sw.send(hosts[i].port, netsum_frame(hosts[i], job_id=JOB, slot=slot,
                                                          round=r, values=vecs[i], exp=exps[i]))
                if pos == 1 and slot in prev:
                    # the last worker has not sent this round yet; its retransmission of the
                    # previous round (other set) is answered with the stored result
                    late = order[-1]
                    again = sw.send(hosts[late].port, netsum_frame(
                        hosts[late], job_id=JOB, slot=slot, round=r - 1,
                        values=[12345] * K_DEFAULT))
                    assert [p for p, _ in again] == [hosts[late].port]
                    assert parse_frame(again[0][1]).values == prev[slot]
                    assert parse_frame(again[0][1]).header["round"] == r - 1
            assert len(out) == n, f"round {r} slot {slot}"
            result = parse_frame(out[0][1])
            assert result.values == vec_sum(vecs)
            assert result.header["exp"] == max(exps)
            assert result.header["round"] == r
            prev[slot] = result.values
            assert sw.register("held_round", reg_index(10, slot, r % 2)) == r
            assert sw.register("bitmap", reg_index(10, slot, r % 2)) == 0b111
            if r:
                # the other set still holds the previous round, whole
                assert sw.register("held_round", reg_index(10, slot, 1 - r % 2)) == r - 1
                assert sw.register("bitmap", reg_index(10, slot, 1 - r % 2)) == 0b111


def test_jobs_are_independent() -> None:
    sw = NetsumSwitch(netsum_config())
    a = [worker_host(i) for i in range(2)]
    b = [worker_host(i) for i in range(1, 4)]      # worker 1 and 2 take part in both jobs
    sw.add_job(1, a, slot_base=0, num_slots=8)
    sw.add_job(2, b, slot_base=8, num_slots=8)
    # same slot index, interleaved
    assert sw.send(1, netsum_frame(a[0], job_id=1, slot=3, values=[1] * K_DEFAULT)) == []
    assert sw.send(2, netsum_frame(b[0], job_id=2, slot=3, values=[10] * K_DEFAULT)) == []
    assert sw.send(3, netsum_frame(b[1], job_id=2, slot=3, values=[20] * K_DEFAULT)) == []
    out1 = sw.send(2, netsum_frame(a[1], job_id=1, slot=3, values=[2] * K_DEFAULT))
    assert sorted(p for p, _ in out1) == [1, 2]
    assert {parse_frame(f).values for _, f in out1} == {(3,) * K_DEFAULT}
    assert all(parse_frame(f).header["job_id"] == 1 for _, f in out1)
    out2 = sw.send(4, netsum_frame(b[2], job_id=2, slot=3, values=[30] * K_DEFAULT))
    assert sorted(p for p, _ in out2) == [2, 3, 4]
    assert {parse_frame(f).values for _, f in out2} == {(60,) * K_DEFAULT}
    assert sw.counter("results_out", 1) == 2 and sw.counter("results_out", 2) == 3


@pytest.mark.parametrize("k", [pytest.param(k, marks=pytest.mark.slow) if k >= 2048 else k
                               for k in K_SUPPORTED])
def test_every_k_build_aggregates_k_values(k: int) -> None:
    sw, hosts = make_switch(2, k=k)
    rng = random.Random(k)
    vecs = [rand_values(rng, k), rand_values(rng, k)]
    sw.send(1, netsum_frame(hosts[0], job_id=JOB, slot=0, values=vecs[0], exp=3))
    out = sw.send(2, netsum_frame(hosts[1], job_id=JOB, slot=0, values=vecs[1], exp=4))
    assert len(out) == 2
    want = tuple(wrap32(a + b) for a, b in zip(*vecs))
    for port, frame in out:
        check_result(parse_frame(frame, k=k), to=hosts[port - 1], job=JOB, slot=0, round_=0,
                     exp=4, count=2, values=want)
    assert sw.register(f"val{k - 1:03d}", 0) == want[-1] & 0xFFFFFFFF


def _round(sw: NetsumSwitch, hosts: Sequence[Host], job: int, slot: int, round_: int,
           values: Sequence[Sequence[int]]) -> list[list[tuple[int, bytes]]]:
    return [sw.send(h.port, netsum_frame(h, job_id=job, slot=slot, round=round_, values=v))
            for h, v in zip(hosts, values)]


def test_slots_reused_by_another_job_start_fresh_rounds() -> None:
    from netsum.switch.entries import Exact

    sw = NetsumSwitch(netsum_config())
    hosts = [worker_host(i) for i in range(2)]
    sw.add_job(1, hosts, slot_base=0, num_slots=4)
    outs = _round(sw, hosts, 1, 0, 0, [[5] * K_DEFAULT] * 2)
    assert parse_frame(outs[-1][0][1]).values == (10,) * K_DEFAULT
    # the controller removes job 1 and hands its slot range to job 2 (same worker bits)
    sw.pipeline.tables["NetsumIngress.job"].delete((Exact(1),), 0)
    sw.add_job(2, hosts, slot_base=0, num_slots=4)
    outs = _round(sw, hosts, 2, 0, 0, [[7] * K_DEFAULT] * 2)
    assert outs[0] == []                 # not a replay of job 1's result
    assert len(outs[1]) == 2
    p = parse_frame(outs[1][0][1])
    assert (p.header["job_id"], p.header["count"], p.values) == (2, 2, (14,) * K_DEFAULT)
    assert sw.counter("retransmissions", 2) == 0


def test_epoch_bump_starts_fresh_rounds_for_a_rerun() -> None:
    sw, hosts = make_switch(2)
    for r in range(4):
        _round(sw, hosts, JOB, 0, r, [[1] * K_DEFAULT] * 2)
    # A new registration of the same job in the same epoch starts at round 0: older than what
    # the slot holds, so it is refused (the worker would time out: the controller must bump the
    # epoch when it registers a job again).
    again = sw.send(1, netsum_frame(hosts[0], job_id=JOB, slot=0, round=0, values=[9] * K_DEFAULT))
    assert again == [] and sw.counter("drop_stale", JOB) == 1
    # with a new epoch (what the controller sets when it reinstalls the job) it starts afresh
    sw.set_epoch(JOB, 1)
    outs = _round(sw, hosts, JOB, 0, 0, [[9] * K_DEFAULT, [4] * K_DEFAULT])
    assert outs[0] == []
    assert {parse_frame(f).values for _, f in outs[1]} == {(13,) * K_DEFAULT}
    assert sw.register("owner", 0) == (1 << 16) | JOB
    assert sw.register("held_round", 0) == 0
    # and rounds go on normally within the epoch
    outs = _round(sw, hosts, JOB, 0, 1, [[3] * K_DEFAULT] * 2)
    assert {parse_frame(f).values for _, f in outs[1]} == {(6,) * K_DEFAULT}
