"""netsum.p4 keeps jobs apart, packet by packet: membership is bound to the ingress port, the
IPv4 source and the Ethernet source; nothing a host on another port sends reaches a job's sums
or draws a RESULT; a member of one job cannot reach another job's sums or slots; a RESULT only
leaves on a member port of its job; a leaf takes results only from its parent.  Every refusal is
counted by reason.  Expectations are worked out from the entries installed here."""
from __future__ import annotations

import pytest

from p4helpers import (Host, NetsumSwitch, ip_int, mac_int, netsum_config, netsum_frame, one_reply,
                       parse_frame, vec_sum, worker_host)
from netsum.wire import K_DEFAULT, MsgType, Reason

JOB_A, JOB_B = 3, 4
REFUSALS = ("drop_non_member", "drop_bad_slot", "drop_unknown_job", "drop_bad_type",
            "drop_malformed", "drop_stale", "drop_result_port")


def two_jobs() -> tuple[NetsumSwitch, list[Host], list[Host]]:
    """Job A: workers 0, 1 (ports 1, 2), slots 0..7; job B: workers 2, 3 (ports 3, 4),
    slots 8..15.  Port 9 is a host that belongs to no job."""
    sw = NetsumSwitch(netsum_config())
    a = [worker_host(0), worker_host(1)]
    b = [worker_host(2), worker_host(3)]
    sw.add_job(JOB_A, a, slot_base=0, num_slots=8)
    sw.add_job(JOB_B, b, slot_base=8, num_slots=8)
    return sw, a, b


def refusals(sw: NetsumSwitch, job: int) -> dict[str, int]:
    return {name: sw.counter(name, job) for name in REFUSALS if sw.counter(name, job)}


def state(sw: NetsumSwitch) -> dict[str, list[int]]:
    return {name: list(reg.values) for name, reg in sw.pipeline.registers.items()}


def frame(h: Host, job: int, round_: int = 0, slot: int = 0, fill: int = 1, **kw: object) -> bytes:
    return netsum_frame(h, job_id=job, slot=slot, round=round_, values=[fill] * K_DEFAULT,
                        exp=120, **kw)  # type: ignore[arg-type]


def test_replay_from_a_non_member_port_changes_nothing_and_gets_no_result() -> None:
    """A rogue host on port 9 replays a member's captured DATA (the member's IPv4 and MAC):
    before the round completes, during it and after it.  No register changes, nothing leaves
    the switch, every replay is counted; the real members then get the exact sum."""
    sw, a, _ = two_jobs()
    rogue_port = 9
    captured = [frame(a[0], JOB_A, fill=5), frame(a[0], JOB_A, round_=1, fill=7)]
    before = state(sw)
    for f in captured:
        assert sw.send(rogue_port, f) == []
    assert state(sw) == before
    assert sw.send(a[0].port, captured[0]) == []          # the real member, on its port
    mid = state(sw)
    for f in captured:
        assert sw.send(rogue_port, f) == []
    assert state(sw) == mid
    out = sw.send(a[1].port, frame(a[1], JOB_A, fill=6))
    assert sorted(p for p, _ in out) == [1, 2]
    assert {parse_frame(f).values for _, f in out} == {(11,) * K_DEFAULT}
    done = state(sw)
    # After the round is done a member's duplicate would be answered: the rogue's is not.
    assert sw.send(rogue_port, captured[0]) == []
    assert state(sw) == done
    assert refusals(sw, JOB_A) == {"drop_non_member": 5}
    assert sw.counter("results_out", JOB_A) == 2


@pytest.mark.parametrize("what", ["port", "ipv4", "mac"])
def test_membership_needs_port_ipv4_and_mac(what: str) -> None:
    """Each of the three parts of a member's identity is checked: the right two with a wrong
    third is not the member."""
    sw, a, _ = two_jobs()
    h = a[0]
    port, src_ip, src_mac = h.port, h.ip, h.mac
    if what == "port":
        port = a[1].port                   # another member's port (a[1] is on port 2)
    elif what == "ipv4":
        src_ip = a[1].ip
    else:
        src_mac = a[1].mac
    f = frame(h, JOB_A, src_ip=src_ip, src_mac=src_mac)
    before = state(sw)
    assert sw.send(port, f) == []
    assert state(sw) == before
    assert refusals(sw, JOB_A) == {"drop_non_member": 1}


def test_member_of_job_a_forging_job_b_is_refused() -> None:
    """A worker of job A writes job B's id (and its slot numbers): not a member of B."""
    sw, a, b = two_jobs()
    before = state(sw)
    for slot in (0, 7):
        assert sw.send(a[0].port, frame(a[0], JOB_B, slot=slot)) == []
    assert state(sw) == before
    assert refusals(sw, JOB_B) == {"drop_non_member": 2}
    assert refusals(sw, JOB_A) == {}
    # B's own round is unaffected
    sw.send(b[0].port, frame(b[0], JOB_B, fill=2))
    out = sw.send(b[1].port, frame(b[1], JOB_B, fill=3))
    assert {parse_frame(f).values for _, f in out} == {(5,) * K_DEFAULT}


@pytest.mark.parametrize("slot", [8, 15, 0xFFFF])
def test_member_of_job_a_naming_job_b_slots_is_refused(slot: int) -> None:
    """Slots are relative to the job's range: A's slot 8..15 would be B's registers if the
    switch took them; it refuses any slot >= A's num_slots."""
    sw, a, _ = two_jobs()
    before = state(sw)
    p = one_reply(sw.send(a[0].port, frame(a[0], JOB_A, slot=slot)), a[0])
    assert (p.header["msg_type"], p.header["reason"]) == (MsgType.REJECT, Reason.SLOT)
    # nothing changed but A's own record of its last refusal (for its members' STATUS)
    record = {f"NetsumIngress.{r}" for r in ("last_refusal", "last_refused_bit",
                                               "last_refusal_tag")}
    after = state(sw)
    assert {n: v for n, v in after.items() if n not in record} == \
        {n: v for n, v in before.items() if n not in record}
    assert (sw.register("last_refusal", JOB_A), sw.register("last_refused_bit", JOB_A)) == \
        (Reason.SLOT, 0b01)
    assert sw.register("last_refusal", JOB_B) == 0
    assert refusals(sw, JOB_A) == {"drop_bad_slot": 1}


def test_unknown_job_from_anyone_is_refused() -> None:
    sw, a, _ = two_jobs()
    assert sw.send(a[0].port, frame(a[0], 99)) == []
    assert refusals(sw, 99) == {"drop_unknown_job": 1}


def test_result_never_leaves_on_a_non_member_port() -> None:
    """A multicast group that (by mistake) also lists port 9 with a replica entry: the copy
    for port 9 is refused in egress and counted; the members get theirs."""
    from netsum.switch.entries import Exact, Replica

    sw, a, _ = two_jobs()
    mgid = 100 + JOB_A
    sw.pipeline.pre.mc_group_modify(mgid, [Replica(1, 200), Replica(2, 201), Replica(9, 202)])
    for rank, (rid, h) in enumerate(((200, a[0]), (201, a[1]), (202, worker_host(8, port=9)))):
        sw.insert("NetsumEgress.replica", [Exact(rid), Exact(h.port)],
                  "NetsumEgress.set_replica", [mac_int(h.mac), ip_int(h.ip), h.udp_port, rank])
    sw.send(a[0].port, frame(a[0], JOB_A))
    out = sw.send(a[1].port, frame(a[1], JOB_A))
    assert sorted(p for p, _ in out) == [1, 2]
    assert refusals(sw, JOB_A) == {"drop_result_port": 1}
    assert sw.counter("results_out", JOB_A) == 2


def test_result_of_job_b_cannot_leave_on_job_a_ports() -> None:
    """result_port is keyed on the job: job B's group pointed at A's port 1 sends nothing
    there."""
    from netsum.switch.entries import Replica

    sw, a, b = two_jobs()
    sw.pipeline.pre.mc_group_modify(100 + JOB_B, [Replica(3, 300), Replica(4, 301),
                                                  Replica(1, 302)])
    sw.send(b[0].port, frame(b[0], JOB_B))
    out = sw.send(b[1].port, frame(b[1], JOB_B))
    assert sorted(p for p, _ in out) == [3, 4]
    assert refusals(sw, JOB_B) == {"drop_result_port": 1}


# ---- a leaf ---------------------------------------------------------------------------------

UP_PORT = 10
ROOT_SVC = Host(UP_PORT, "02:00:00:00:ff:fe", "10.255.0.254", 0x6E73)
LEAF_SVC = Host(1, "02:00:00:00:01:fe", "10.1.0.254", 0x6E73)


def leaf_switch() -> tuple[NetsumSwitch, list[Host]]:
    sw = NetsumSwitch(netsum_config())
    hosts = [worker_host(0), worker_host(1)]
    sw.add_leaf_job(JOB_A, hosts, leaf=LEAF_SVC, up=ROOT_SVC, up_port=UP_PORT)
    return sw, hosts


def root_result(round_: int, fill: int, src: Host = ROOT_SVC) -> bytes:
    return netsum_frame(src, job_id=JOB_A, slot=0, round=round_, values=[fill] * K_DEFAULT,
                        msg_type=MsgType.RESULT, count=2, exp=120, dst_mac=LEAF_SVC.mac,
                        dst_ip=LEAF_SVC.ip)


def test_leaf_takes_results_only_from_its_parent() -> None:
    """On the uplink port, a RESULT from another address is refused; from the parent, for the
    round the leaf holds, it is stored and multicast to the leaf's workers."""
    sw, hosts = leaf_switch()
    for w, h in enumerate(hosts):
        sw.send(h.port, netsum_frame(h, job_id=JOB_A, slot=0, values=[w + 1] * K_DEFAULT,
                                     exp=120, dst_mac=LEAF_SVC.mac, dst_ip=LEAF_SVC.ip))
    forged = Host(UP_PORT, "02:00:00:00:66:66", ROOT_SVC.ip, 0x6E73)
    before = state(sw)
    assert sw.send(UP_PORT, root_result(0, 999, src=forged)) == []
    assert state(sw) == before
    assert refusals(sw, JOB_A) == {"drop_non_member": 1}
    # a result for a round the leaf does not hold
    assert sw.send(UP_PORT, root_result(2, 999)) == []
    assert refusals(sw, JOB_A) == {"drop_non_member": 1, "drop_stale": 1}
    out = sw.send(UP_PORT, root_result(0, 6))
    assert sorted(p for p, _ in out) == [1, 2]
    assert {parse_frame(f).values for _, f in out} == {(6,) * K_DEFAULT}


def test_leaf_contribution_counts_at_the_root_only_on_its_port() -> None:
    """At the root a leaf is a member on the root's port towards it: its partial sum, replayed
    into another root port (with the leaf's addresses), is refused."""
    root = NetsumSwitch(netsum_config())
    leaves = [Host(1, "02:00:00:00:01:fe", "10.1.0.254", 0x6E73),
              Host(2, "02:00:00:00:02:fe", "10.2.0.254", 0x6E73)]
    root.add_job(JOB_A, leaves, num_slots=8)
    partial = netsum_frame(leaves[0], job_id=JOB_A, slot=0, values=[4] * K_DEFAULT, exp=1)
    before = state(root)
    assert root.send(2, partial) == []
    assert state(root) == before
    assert refusals(root, JOB_A) == {"drop_non_member": 1}
    assert root.send(1, partial) == []
    out = root.send(2, netsum_frame(leaves[1], job_id=JOB_A, slot=0, values=[5] * K_DEFAULT,
                                    exp=1))
    assert sorted(p for p, _ in out) == [1, 2]
    assert {parse_frame(f).values for _, f in out} == {vec_sum([[4] * K_DEFAULT,
                                                               [5] * K_DEFAULT])}
