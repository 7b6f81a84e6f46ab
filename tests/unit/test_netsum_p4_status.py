"""netsum.p4's STATUS reply, packet by packet: a member that re-sends DATA for a slot still
missing contributions learns the slot's state (docs/protocol.md, "STATUS").

Expectations are worked out here from the packets sent: the bitmap is the OR of the worker bits
(1 << index, as the controller assigns them) of the members that contributed, the count how many
did, the exponent the max of their proposals; the reply goes to the sender alone with addresses
and ports swapped, and nowhere else."""
from __future__ import annotations

from p4helpers import (data_fields, Host, NetsumSwitch, netsum_config, netsum_frame, parse_frame, vec_sum,
                       worker_host, wrap32)
from test_netsum_p4_tree import (ROOT_SERVICE, UP_PORT, leaf_service, make_tree,
                                 send_from_worker)
from netsum.wire import K_DEFAULT, UDP_PORT, Flags, MsgType

JOB = 6
SLOT_BASE = 4
SERVICE_MAC, SERVICE_IP = "02:00:00:00:00:fe", "10.0.0.254"


def values(worker: int, round_: int) -> list[int]:
    return [wrap32(1000 * round_ + 10 * worker + lane - 7) for lane in range(K_DEFAULT)]


def data(h: Host, worker: int, round_: int = 0, slot: int = 1, retx: bool = False,
         offset: int = 96) -> bytes:
    return netsum_frame(h, job_id=JOB, slot=slot, round=round_, values=values(worker, round_),
                        exp=100 + 3 * worker, offset=offset, flags=Flags.RETX if retx else 0)


def make_switch(n: int = 4) -> tuple[NetsumSwitch, list[Host]]:
    sw = NetsumSwitch(netsum_config())
    hosts = [worker_host(i) for i in range(n)]
    sw.add_job(JOB, hosts, slot_base=SLOT_BASE, num_slots=4)
    return sw, hosts


def test_a_members_duplicate_on_an_incomplete_slot_gets_one_status_to_itself() -> None:
    """Workers 0, 1 and 3 of 4 contributed (worker 2 is missing); worker 1 re-sends: one STATUS
    out of worker 1's port, to worker 1's addresses, bitmap 0b1011 (in every lane: v000 is the
    one workers read), count 3, exp max(100, 103, 109); the slot's state is unchanged."""
    sw, hosts = make_switch()
    for w in (0, 1, 3):
        assert sw.send(hosts[w].port, data(hosts[w], w)) == []
    before = [sw.register(r, (SLOT_BASE + 1) * 2) for r in ("bitmap", "contributions", "val001")]
    out = sw.send(hosts[1].port, data(hosts[1], 1, retx=True))
    assert [port for port, _ in out] == [hosts[1].port]
    p = parse_frame(out[0][1])
    assert (p.eth_src, p.ip_src, p.sport) == (SERVICE_MAC, SERVICE_IP, UDP_PORT)
    h = hosts[1]
    assert (p.eth_dst, p.ip_dst, p.dport) == (h.mac, h.ip, h.udp_port)
    assert p.ip_checksum_ok and p.udp_checksum == 0
    assert p.header == {"msg_type": MsgType.STATUS, "flags": 0, "job_id": JOB, "slot": 1,
                        "exp": 109, "count": 3, "round": 0, "offset": 96,
                        # reason and length: the job's last refusal (none here)
                        **data_fields(JOB, reason=0, length=0)}
    assert p.values == (0b1011,) * K_DEFAULT
    assert len(out[0][1]) == len(data(h, 1))             # same frame size as the DATA
    after = [sw.register(r, (SLOT_BASE + 1) * 2) for r in ("bitmap", "contributions", "val001")]
    assert after == before
    assert sw.counter("retransmissions", JOB) == 1
    assert sw.counter("status_out", JOB) == 1
    assert sw.counter("results_out", JOB) == 0
    # The missing worker's contribution still completes the slot with the exact sum.
    done = sw.send(hosts[2].port, data(hosts[2], 2))
    assert sorted(port for port, _ in done) == [h.port for h in hosts]
    assert {parse_frame(f).values for _, f in done} == {vec_sum([values(w, 0) for w in range(4)])}


def test_the_status_tracks_the_slot_as_contributions_arrive() -> None:
    """Each member's duplicate reports the state at that moment, in the set of its round."""
    sw, hosts = make_switch()
    sw.send(hosts[2].port, data(hosts[2], 2, round_=1, slot=3))
    got = parse_frame(sw.send(hosts[2].port, data(hosts[2], 2, round_=1, slot=3))[0][1])
    assert (got.values[0], got.header["count"], got.header["exp"]) == (0b0100, 1, 106)
    sw.send(hosts[0].port, data(hosts[0], 0, round_=1, slot=3))
    got = parse_frame(sw.send(hosts[0].port, data(hosts[0], 0, round_=1, slot=3))[0][1])
    assert (got.values[0], got.header["count"], got.header["exp"]) == (0b0101, 2, 106)
    assert got.header["round"] == 1 and got.header["slot"] == 3
    assert sw.counter("status_out", JOB) == 2 and sw.counter("retransmissions", JOB) == 2


def test_a_non_members_copy_gets_nothing() -> None:
    """A member's DATA replayed from another port, or from a host in no job, changes nothing
    and learns nothing: no STATUS, counted as non-member."""
    sw, hosts = make_switch()
    for w in (0, 1):
        sw.send(hosts[w].port, data(hosts[w], w))
    rogue = worker_host(9, port=9)
    assert sw.send(rogue.port, data(hosts[0], 0)) == []                  # replayed elsewhere
    assert sw.send(rogue.port, data(rogue, 0)) == []                     # a host in no job
    spoof = netsum_frame(rogue, job_id=JOB, slot=1, values=values(1, 0), src_mac=hosts[1].mac,
                         src_ip=hosts[1].ip, offset=96)
    assert sw.send(rogue.port, spoof) == []
    assert sw.counter("drop_non_member", JOB) == 3
    assert sw.counter("status_out", JOB) == 0 and sw.counter("retransmissions", JOB) == 0
    assert sw.register("bitmap", (SLOT_BASE + 1) * 2) == 0b0011


def test_a_complete_slot_still_replays_the_result() -> None:
    sw, hosts = make_switch(2)
    out = []
    for w in (0, 1):
        out = sw.send(hosts[w].port, data(hosts[w], w))
    assert len(out) == 2
    again = sw.send(hosts[0].port, data(hosts[0], 0, retx=True))
    assert [port for port, _ in again] == [hosts[0].port]
    p = parse_frame(again[0][1])
    assert p.header["msg_type"] == MsgType.RESULT and p.header["count"] == 2
    assert p.values == vec_sum([values(0, 0), values(1, 0)])
    assert sw.counter("status_out", JOB) == 0


def test_a_status_is_refused_on_a_port_without_result_port() -> None:
    """Egress treats a STATUS as it treats a RESULT: only ports the job's result_port entries
    name see it (here the member's port has none, as after a misconfiguration)."""
    sw = NetsumSwitch(netsum_config())
    hosts = [worker_host(i) for i in range(3)]
    sw.add_job_root(JOB, SLOT_BASE, 4, 3, 77)
    for i, h in enumerate(hosts):
        sw.add_member(JOB, h, i)
    sw.allow_results(JOB, [hosts[1].port, hosts[2].port])    # not worker 0's port
    sw.send(hosts[0].port, data(hosts[0], 0))
    assert sw.send(hosts[0].port, data(hosts[0], 0)) == []
    assert sw.counter("drop_result_port", JOB) == 1 and sw.counter("status_out", JOB) == 0
    sw.send(hosts[1].port, data(hosts[1], 1))
    out = sw.send(hosts[1].port, data(hosts[1], 1))
    assert [port for port, _ in out] == [hosts[1].port]
    assert parse_frame(out[0][1]).values[0] == 0b011


def test_a_status_sent_to_the_switch_is_a_bad_type() -> None:
    sw, hosts = make_switch()
    frame = netsum_frame(hosts[0], job_id=JOB, slot=1, values=values(0, 0),
                         msg_type=MsgType.STATUS)
    assert sw.send(hosts[0].port, frame) == []
    assert sw.counter("drop_bad_type", JOB) == 1
    assert sw.register("bitmap", (SLOT_BASE + 1) * 2) == 0


def test_leaves_status_to_workers_and_resend_up_when_locally_complete() -> None:
    """At a leaf: a duplicate while the leaf's own workers are incomplete gets the leaf's
    STATUS (its local bitmap); once locally complete, a duplicate re-sends the partial sum up
    as before.  The root answers a re-sent partial of an incomplete root slot with a STATUS to
    the leaf, which the leaf takes from its parent and drops uncounted."""
    t = make_tree(leaves=2, per_leaf=3)
    leaf = t.leaves[0]
    v = {i: values(i, 0) for i in range(3)}
    send_from_worker(t, 0, 0, job_id=JOB_T, slot=2, values=v[0], exp=120)
    send_from_worker(t, 0, 2, job_id=JOB_T, slot=2, values=v[2], exp=110)
    out = send_from_worker(t, 0, 2, job_id=JOB_T, slot=2, values=v[2], exp=110, flags=Flags.RETX)
    assert [port for port, _ in out] == [t.workers[0][2].port]
    p = parse_frame(out[0][1])
    assert (p.eth_src, p.ip_src) == (leaf_service(0).mac, leaf_service(0).ip)
    assert (p.eth_dst, p.ip_dst, p.dport) == (t.workers[0][2].mac, t.workers[0][2].ip,
                                              t.workers[0][2].udp_port)
    assert p.header["msg_type"] == MsgType.STATUS and p.header["count"] == 2
    assert p.header["exp"] == 120 and p.values[0] == 0b101
    up = send_from_worker(t, 0, 1, job_id=JOB_T, slot=2, values=v[1], exp=100)
    assert [port for port, _ in up] == [UP_PORT]
    assert t.root.send(1, up[0][1]) == []                     # leaf 1 has not sent yet
    again = send_from_worker(t, 0, 1, job_id=JOB_T, slot=2, values=v[1], exp=100)
    assert [port for port, _ in again] == [UP_PORT]          # resend_up, not a STATUS
    resent = parse_frame(again[0][1])
    assert resent.header["msg_type"] == MsgType.DATA and resent.header["flags"] == Flags.RETX
    assert resent.values == vec_sum([v[0], v[1], v[2]])
    status = t.root.send(1, again[0][1])                     # the root: leaf 0 re-sent
    assert [port for port, _ in status] == [1]
    sp = parse_frame(status[0][1])
    assert sp.header["msg_type"] == MsgType.STATUS and sp.values[0] == 0b01
    assert (sp.eth_dst, sp.ip_dst) == (leaf_service(0).mac, leaf_service(0).ip)
    assert (sp.eth_src, sp.ip_src) == (ROOT_SERVICE.mac, ROOT_SERVICE.ip)
    assert leaf.send(UP_PORT, status[0][1]) == []
    for name in ("drop_bad_type", "drop_non_member", "drop_stale"):
        assert leaf.counter(name, JOB_T) == 0, name
    assert leaf.counter("status_out", JOB_T) == 1 and t.root.counter("status_out", JOB_T) == 1


JOB_T = 9     # test_netsum_p4_tree's job id
