"""netsum.p4 as a two-level tree: two leaf switches and a root, three embedded Device instances
wired by hand (the test moves frames between their ports, and can lose them on the way)."""
from __future__ import annotations

import random
from dataclasses import dataclass

from p4helpers import (data_fields, Host, NetsumSwitch, Parsed, netsum_config, netsum_frame, parse_frame)
from netsum.wire import K_DEFAULT, RANK_SWITCH, UDP_PORT, Flags, MsgType

JOB = 9
UP_PORT = 10                       # every leaf's port toward the root
ROOT_SERVICE = Host(0, "02:00:00:00:ff:fe", "10.255.0.254", UDP_PORT)


def leaf_service(j: int) -> Host:
    # A leaf's service address: its workers send to it, and it is the leaf's identity at the root.
    return Host(j + 1, f"02:00:00:00:{j + 1:02x}:fe", f"10.{j + 1}.0.254", UDP_PORT)


def leaf_worker(j: int, i: int) -> Host:
    return Host(i + 1, f"02:00:00:{j + 1:02x}:00:{i + 1:02x}", f"10.{j + 1}.0.{i + 1}",
                41000 + 100 * j + i)


@dataclass
class Tree:
    root: NetsumSwitch
    leaves: list[NetsumSwitch]
    workers: list[list[Host]]


def make_tree(leaves: int = 2, per_leaf: int = 2) -> Tree:
    config = netsum_config()
    root = NetsumSwitch(config)
    # at the root the members are the leaves, on root ports 1..leaves, identified by leaf address
    # every worker says the job's member count (leaves x per_leaf); ranks run leaf by leaf
    total = leaves * per_leaf
    root.add_job(JOB, [leaf_service(j) for j in range(leaves)], slot_base=0, num_slots=8,
                 job_workers=total, ranks=[RANK_SWITCH] * leaves)
    sws, workers = [], []
    for j in range(leaves):
        sw = NetsumSwitch(config)
        hosts = [leaf_worker(j, i) for i in range(per_leaf)]
        sw.add_job_leaf(JOB, slot_base=16, num_slots=8, num_workers=per_leaf, mgid=50,
                        up_port=UP_PORT, leaf=leaf_service(j), up=ROOT_SERVICE,
                        job_workers=total)
        ranks = [j * per_leaf + i for i in range(per_leaf)]
        for i, h in enumerate(hosts):
            sw.add_member(JOB, h, i, ranks[i])
        sw.add_result_group(50, hosts, rid_base=1, ranks=ranks)
        sw.allow_results(JOB, [h.port for h in hosts])
        sws.append(sw)
        workers.append(hosts)
    return Tree(root, sws, workers)


def send_from_worker(t: Tree, j: int, i: int, **kw: object) -> list[tuple[int, bytes]]:
    h = t.workers[j][i]
    return t.leaves[j].send(h.port, netsum_frame(h, dst_mac=leaf_service(j).mac,
                                                 dst_ip=leaf_service(j).ip, **kw))  # type: ignore[arg-type]


def check_partial(p: Parsed, j: int, *, slot: int, round_: int, exp: int, values: tuple[int, ...],
                  flags: int = 0) -> None:
    leaf = leaf_service(j)
    assert (p.eth_src, p.ip_src, p.sport) == (leaf.mac, leaf.ip, UDP_PORT)
    assert (p.eth_dst, p.ip_dst, p.dport) == (ROOT_SERVICE.mac, ROOT_SERVICE.ip, UDP_PORT)
    assert p.ip_checksum_ok and p.udp_checksum == 0
    assert p.header == {"msg_type": MsgType.DATA, "flags": flags, "job_id": JOB, "round": round_,
                        "slot": slot, "exp": exp, "count": 0, "offset": 0, **data_fields(JOB)}
    assert p.values == values


def check_final(p: Parsed, j: int, to: Host, *, slot: int, round_: int, exp: int, count: int,
                values: tuple[int, ...]) -> None:
    leaf = leaf_service(j)
    assert (p.eth_src, p.ip_src, p.sport) == (leaf.mac, leaf.ip, UDP_PORT)
    assert (p.eth_dst, p.ip_dst, p.dport) == (to.mac, to.ip, to.udp_port)
    assert p.ip_checksum_ok and p.udp_checksum == 0
    assert p.header == {"msg_type": MsgType.RESULT, "flags": 0, "job_id": JOB, "round": round_,
                        "slot": slot, "exp": exp, "count": count, "offset": 0,
                        **data_fields(JOB)}
    assert p.values == values


def vec(x: int) -> list[int]:
    return [x + i for i in range(K_DEFAULT)]


def test_leaf_partials_go_up_and_the_final_result_comes_down() -> None:
    t = make_tree()
    rng = random.Random(3)
    vals = {(j, i): [rng.randint(-(1 << 28), 1 << 28) for _ in range(K_DEFAULT)]
            for j in range(2) for i in range(2)}
    exps = {(0, 0): 100, (0, 1): 104, (1, 0): 110, (1, 1): 90}
    partials: dict[int, bytes] = {}
    for j in range(2):
        assert send_from_worker(t, j, 0, job_id=JOB, slot=3, round=1, values=vals[(j, 0)],
                                exp=exps[(j, 0)]) == []
        out = send_from_worker(t, j, 1, job_id=JOB, slot=3, round=1, values=vals[(j, 1)],
                               exp=exps[(j, 1)])
        assert [p for p, _ in out] == [UP_PORT]
        local = tuple(a + b for a, b in zip(vals[(j, 0)], vals[(j, 1)]))
        check_partial(parse_frame(out[0][1]), j, slot=3, round_=1,
                      exp=max(exps[(j, 0)], exps[(j, 1)]), values=local)
        partials[j] = out[0][1]
        assert t.leaves[j].counter("partials_up", JOB) == 1
        assert t.leaves[j].register("done", (16 + 3) * 2 + 1) == 0   # not final yet

    # the root aggregates the two partials (leaf j is on root port j+1)
    assert t.root.send(1, partials[0]) == []
    down = t.root.send(2, partials[1])
    assert sorted(p for p, _ in down) == [1, 2]
    total = tuple(sum(vals[(j, i)][x] for j in range(2) for i in range(2))
                  for x in range(K_DEFAULT))
    for port, frame in down:
        p = parse_frame(frame)
        leaf = leaf_service(port - 1)
        assert (p.ip_dst, p.eth_dst, p.dport) == (leaf.ip, leaf.mac, UDP_PORT)
        assert p.header["msg_type"] == MsgType.RESULT and p.values == total
        # each leaf stores the final result and multicasts it to its own workers
        out = t.leaves[port - 1].send(UP_PORT, frame)
        assert sorted(q for q, _ in out) == [1, 2]
        for q, f in out:
            check_final(parse_frame(f), port - 1, t.workers[port - 1][q - 1], slot=3, round_=1,
                        exp=110, count=2, values=total)

    # a worker that lost the final result gets it from its leaf alone
    out = send_from_worker(t, 1, 0, job_id=JOB, slot=3, round=1, values=[0] * K_DEFAULT,
                           flags=Flags.RETX)
    assert [p for p, _ in out] == [1]
    check_final(parse_frame(out[0][1]), 1, t.workers[1][0], slot=3, round_=1, exp=110, count=2,
                values=total)


def test_lost_partial_is_resent_by_a_worker_retransmission() -> None:
    t = make_tree()
    send_from_worker(t, 0, 0, job_id=JOB, slot=0, values=vec(1), exp=5)
    lost = send_from_worker(t, 0, 1, job_id=JOB, slot=0, values=vec(2), exp=6)
    assert [p for p, _ in lost] == [UP_PORT]          # ... and the link loses it
    send_from_worker(t, 1, 0, job_id=JOB, slot=0, values=vec(3), exp=7)
    up1 = send_from_worker(t, 1, 1, job_id=JOB, slot=0, values=vec(4), exp=8)
    assert t.root.send(2, up1[0][1]) == []

    # leaf 0's worker times out and retransmits: the leaf re-sends its partial (RETX)
    again = send_from_worker(t, 0, 1, job_id=JOB, slot=0, values=vec(2), exp=6,
                             flags=Flags.RETX)
    assert [p for p, _ in again] == [UP_PORT]
    local = tuple(a + b for a, b in zip(vec(1), vec(2)))
    check_partial(parse_frame(again[0][1]), 0, slot=0, round_=0, exp=6, values=local,
                  flags=Flags.RETX)
    assert t.leaves[0].counter("retransmissions", JOB) == 1
    assert t.leaves[0].counter("partials_up", JOB) == 2
    down = t.root.send(1, again[0][1])
    assert sorted(p for p, _ in down) == [1, 2]
    total = tuple(a + b + c + d for a, b, c, d in zip(vec(1), vec(2), vec(3), vec(4)))
    assert {parse_frame(f).values for _, f in down} == {total}
    assert {parse_frame(f).header["exp"] for _, f in down} == {8}


def test_lost_final_result_is_recovered_through_the_root() -> None:
    t = make_tree()
    ups = {}
    for j in range(2):
        send_from_worker(t, j, 0, job_id=JOB, slot=1, values=vec(10 * j), exp=1)
        ups[j] = send_from_worker(t, j, 1, job_id=JOB, slot=1, values=vec(5), exp=2)[0][1]
    t.root.send(1, ups[0])
    down = dict(t.root.send(2, ups[1]))
    # leaf 1 receives its copy; leaf 0's copy is lost
    assert len(t.leaves[1].send(UP_PORT, down[2])) == 2

    # a worker of leaf 0 retransmits: locally complete, not final -> the partial goes up again
    again = send_from_worker(t, 0, 0, job_id=JOB, slot=1, values=vec(0), exp=1, flags=Flags.RETX)
    assert [p for p, _ in again] == [UP_PORT]
    # the root sees a duplicate of a final slot: the result goes back to leaf 0 only
    reply = t.root.send(1, again[0][1])
    assert [p for p, _ in reply] == [1]
    p = parse_frame(reply[0][1])
    assert (p.ip_dst, p.dport, p.header["msg_type"]) == (leaf_service(0).ip, UDP_PORT,
                                                          MsgType.RESULT)
    assert t.root.counter("retransmissions", JOB) == 1
    # leaf 0 stores it and multicasts it to its workers
    out = t.leaves[0].send(UP_PORT, reply[0][1])
    assert sorted(q for q, _ in out) == [1, 2]
    total = tuple(a + b + c + d for a, b, c, d in zip(vec(0), vec(5), vec(10), vec(5)))
    for q, f in out:
        check_final(parse_frame(f), 0, t.workers[0][q - 1], slot=1, round_=0, exp=2, count=2,
                    values=total)


def test_result_from_a_non_uplink_port_is_a_bad_type_at_a_leaf() -> None:
    t = make_tree()
    h = t.workers[0][0]
    frame = netsum_frame(h, job_id=JOB, slot=0, values=vec(0), msg_type=MsgType.RESULT)
    assert t.leaves[0].send(h.port, frame) == []
    assert t.leaves[0].counter("drop_bad_type", JOB) == 1
    assert t.leaves[0].register("done", 16 * 2) == 0


def test_resent_partial_for_an_incomplete_root_slot_is_not_added() -> None:
    t = make_tree()
    send_from_worker(t, 0, 0, job_id=JOB, slot=2, values=vec(1), exp=3)
    up = send_from_worker(t, 0, 1, job_id=JOB, slot=2, values=vec(2), exp=3)
    assert t.root.send(1, up[0][1]) == []
    # leaf 1 is slow; a worker of leaf 0 retransmits, the leaf re-sends, the root waits: it
    # answers leaf 0 alone with a STATUS, which leaf 0 drops
    again = send_from_worker(t, 0, 0, job_id=JOB, slot=2, values=vec(1), exp=3, flags=Flags.RETX)
    status = t.root.send(1, again[0][1])
    assert [port for port, _ in status] == [1]
    assert parse_frame(status[0][1]).header["msg_type"] == MsgType.STATUS
    assert t.leaves[0].send(UP_PORT, status[0][1]) == []
    assert t.root.counter("retransmissions", JOB) == 1
    assert t.root.register("contributions", 2 * 2) == 1     # not added twice
    send_from_worker(t, 1, 0, job_id=JOB, slot=2, values=vec(3), exp=3)
    up1 = send_from_worker(t, 1, 1, job_id=JOB, slot=2, values=vec(4), exp=3)
    down = t.root.send(2, up1[0][1])
    total = tuple(a + b + c + d for a, b, c, d in zip(vec(1), vec(2), vec(3), vec(4)))
    assert {parse_frame(f).values for _, f in down} == {total}


def test_a_leafs_partial_carries_its_qexp_and_the_root_checks_it() -> None:
    """issue 23 in a tree.  Leaf 0's workers quantize with 130 and its partial goes up with
    byte 18 = 130; leaf 1's with 131: the root refuses that partial with a REJECT(QEXP) to leaf
    1 alone, `exp` = 130, which leaf 1 keeps as the job's refusal with worker bit 0 (the root
    refused this leaf) and drops; its workers' STATUS replies then carry it.  Once leaf 1's workers send with 130 (the next round), both
    levels sum and the final RESULT every worker gets carries qexp 130."""
    t = make_tree()
    up: dict[int, bytes] = {}
    for j, q in ((0, 130), (1, 131)):
        send_from_worker(t, j, 0, job_id=JOB, slot=4, values=vec(j), exp=2, reason=q)
        out = send_from_worker(t, j, 1, job_id=JOB, slot=4, values=vec(10), exp=3, reason=q)
        assert [p for p, _ in out] == [UP_PORT]
        assert parse_frame(out[0][1]).header["reason"] == q
        up[j] = out[0][1]
    # a worker's duplicate (its byte 18 not compared) re-sends the partial with the round's 130
    again = send_from_worker(t, 0, 1, job_id=JOB, slot=4, values=vec(10), exp=3, reason=0,
                             flags=Flags.RETX)
    assert [p for p, _ in again] == [UP_PORT]
    assert parse_frame(again[0][1]).header["reason"] == 130
    assert t.root.send(1, up[0]) == []
    rej = t.root.send(2, up[1])
    assert [p for p, _ in rej] == [2]
    p = parse_frame(rej[0][1])
    assert (p.ip_dst, p.eth_dst) == (leaf_service(1).ip, leaf_service(1).mac)
    assert (p.header["msg_type"], p.header["reason"], p.header["exp"], p.values) == \
        (MsgType.REJECT, 7, 130, ())
    assert t.root.counter("reject_qexp", JOB) == 1
    assert t.root.register("contributions", 4 * 2) == 1
    assert t.leaves[1].send(UP_PORT, rej[0][1]) == []
    assert (t.leaves[1].register("last_refusal", JOB),
            t.leaves[1].register("last_refused_bit", JOB)) == (7, 0)
    assert t.leaves[1].counter("drop_malformed", JOB) == 0
    # a worker of leaf 1 waiting on another slot learns it from its STATUS: reason 7, bit 0
    send_from_worker(t, 1, 0, job_id=JOB, slot=5, values=vec(0), reason=130)
    st = send_from_worker(t, 1, 0, job_id=JOB, slot=5, values=vec(0), reason=130,
                          flags=Flags.RETX)
    assert [port for port, _ in st] == [t.workers[1][0].port]
    h = parse_frame(st[0][1]).header
    assert (h["msg_type"], h["reason"], h["length"]) == (MsgType.STATUS, 7, 0)

    # round 1 (the other set): every worker with 130, both levels complete
    for j in range(2):
        send_from_worker(t, j, 0, job_id=JOB, slot=4, round=1, values=vec(j), exp=2,
                         reason=130)
        up[j] = send_from_worker(t, j, 1, job_id=JOB, slot=4, round=1, values=vec(10), exp=3,
                                 reason=130)[0][1]
    assert t.root.send(1, up[0]) == []
    down = t.root.send(2, up[1])
    assert sorted(p for p, _ in down) == [1, 2]
    total = tuple(a + b + 2 * c for a, b, c in zip(vec(0), vec(1), vec(10)))
    for port, frame in down:
        out = t.leaves[port - 1].send(UP_PORT, frame)
        assert len(out) == 2
        for _, f in out:
            h = parse_frame(f)
            assert (h.header["msg_type"], h.header["reason"], h.values) == \
                (MsgType.RESULT, 130, total)
    assert t.root.counter("reject_qexp", JOB) == 1
