"""netsum.p4 (protocol v2) on the embedded switch: what a RESULT carries and who gets its values
(issue 22): the NONFINITE flag ORed over a round's contributions, and reduce-scatter's
owner-only delivery (`dest`): the owner's copy keeps the values, every other member's copy is a
header-only ACK, a leaf always gets the values and decides per worker itself.

Frames in, frames out; the expectations follow from the frames sent and docs/protocol.md.
"""
from __future__ import annotations

import pytest

from p4helpers import (SERVICE_IP, SERVICE_MAC, Host, NetsumSwitch, Parsed, netsum_config,
                       netsum_frame, one_reply, parse_frame, vec_sum, worker_host)
from netsum.wire import DEST_ALL, HEADER_BYTES, K_DEFAULT, RANK_SWITCH, UDP_PORT, Flags, MsgType

JOB = 7
NF = int(Flags.NONFINITE)


def make_switch(n: int = 3) -> tuple[NetsumSwitch, list[Host]]:
    sw = NetsumSwitch(netsum_config())
    hosts = [worker_host(i) for i in range(n)]
    sw.add_job(JOB, hosts, slot_base=0, num_slots=8)
    return sw, hosts


def vals(w: int) -> list[int]:
    return [w * 1000 + lane for lane in range(K_DEFAULT)]


def data(h: Host, w: int, *, round_: int = 0, slot: int = 0, **kw: int) -> bytes:
    return netsum_frame(h, job_id=JOB, slot=slot, round=round_, values=vals(w), exp=125,
                        **kw)


def contribute(sw: NetsumSwitch, hosts: list[Host], flags: list[int], **kw: int
               ) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for w, (h, f) in enumerate(zip(hosts, flags)):
        out = sw.send(h.port, data(h, w, flags=f, **kw))
    return out


# ---- NONFINITE ----------------------------------------------------------------------------

@pytest.mark.parametrize("flags, expect", [
    ([0, 0, 0], 0),
    ([0, NF, 0], NF),                      # one member in the middle
    ([NF, 0, 0], NF),                      # the first (start_round records it)
    ([0, 0, NF], NF),                      # the last
    ([NF, NF, NF], NF),
    ([int(Flags.RETX), 0, 0], 0),          # RETX is not carried into the result
])
def test_the_result_carries_the_or_of_nonfinite(flags: list[int], expect: int) -> None:
    sw, hosts = make_switch()
    out = contribute(sw, hosts, flags)
    assert sorted(p for p, _ in out) == [1, 2, 3]
    for _, f in out:
        p = parse_frame(f)
        assert p.header["msg_type"] == MsgType.RESULT and p.header["flags"] == expect
        assert p.values == vec_sum([vals(w) for w in range(3)])   # the values are summed as ever
    assert sw.register("nonfinite", 0) == expect


def test_a_replayed_result_carries_the_flag_and_the_next_round_starts_clean() -> None:
    sw, hosts = make_switch(2)
    contribute(sw, hosts, [NF, 0])
    p = one_reply(sw.send(hosts[1].port, data(hosts[1], 1, flags=int(Flags.RETX))), hosts[1])
    assert (p.header["msg_type"], p.header["flags"]) == (MsgType.RESULT, NF)
    out = contribute(sw, hosts, [0, 0], round_=2)      # the same set, two uses later
    assert {parse_frame(f).header["flags"] for _, f in out} == {0}


def test_single_worker_job_flags_its_own_result() -> None:
    sw, hosts = make_switch(1)
    out = sw.send(hosts[0].port, data(hosts[0], 0, flags=NF))
    assert [parse_frame(f).header["flags"] for _, f in out] == [NF]


# ---- owner-only delivery (reduce-scatter) --------------------------------------------------

def check_ack(p: Parsed, to: Host, *, dest: int, count: int, flags: int = 0) -> None:
    """A header-only RESULT: the full result's header with ACK added; IPv4/UDP lengths for the
    header alone, IPv4 checksum right, addressed to `to` from the service."""
    assert (p.eth_dst, p.ip_dst, p.dport) == (to.mac, to.ip, to.udp_port)
    assert (p.eth_src, p.ip_src, p.sport) == (SERVICE_MAC, SERVICE_IP, UDP_PORT)
    h = p.header
    assert (h["msg_type"], h["flags"], h["dest"], h["count"], h["exp"]) == \
        (MsgType.RESULT, int(Flags.ACK) | flags, dest, count, 125)
    assert p.values == () and p.trailing == 0
    assert (p.ip_len, p.udp_len) == (20 + 8 + HEADER_BYTES, 8 + HEADER_BYTES)
    assert p.ip_checksum_ok and p.udp_checksum == 0


@pytest.mark.parametrize("owner", [0, 1, 2])
def test_only_the_owner_gets_the_values(owner: int) -> None:
    sw, hosts = make_switch()
    out = dict(contribute(sw, hosts, [0, NF, 0], dest=owner))
    assert sorted(out) == [1, 2, 3]
    for w, h in enumerate(hosts):
        p = parse_frame(out[h.port])
        if w == owner:
            assert (p.header["flags"], p.header["dest"]) == (NF, owner)
            assert p.values == vec_sum([vals(v) for v in range(3)])
            assert (p.ip_dst, p.dport) == (h.ip, h.udp_port)
        else:
            check_ack(p, h, dest=owner, count=3, flags=NF)
    # bytes on the downlinks: one whole result, two headers
    full = len(data(hosts[0], 0))
    assert sorted(len(f) for f in out.values()) == [full - 4 * K_DEFAULT] * 2 + [full]
    assert sw.counter("results_out", JOB) == 3


def test_a_duplicate_after_completion_gets_what_its_sender_is_owed() -> None:
    """The stored result replayed: the owner gets the values, a non-owner the ACK only."""
    sw, hosts = make_switch()
    contribute(sw, hosts, [0, 0, 0], dest=2)
    again = one_reply(sw.send(hosts[0].port, data(hosts[0], 0, dest=2, flags=1)), hosts[0])
    check_ack(again, hosts[0], dest=2, count=3)
    mine = one_reply(sw.send(hosts[2].port, data(hosts[2], 2, dest=2, flags=1)), hosts[2])
    assert mine.values == vec_sum([vals(v) for v in range(3)])
    assert mine.header["flags"] == 0


def test_all_reduce_is_dest_all() -> None:
    sw, hosts = make_switch()
    out = contribute(sw, hosts, [0, 0, 0], dest=DEST_ALL)
    assert all(parse_frame(f).values == vec_sum([vals(v) for v in range(3)]) for _, f in out)


def test_a_copy_without_a_replica_entry_is_no_owner() -> None:
    """A multicast copy the controller gave no replica entry (no rank) never takes the values
    of a reduce-scatter round (RANK_NONE), whatever rank the last contributor had."""
    from netsum.switch.entries import Replica

    sw, hosts = make_switch(2)
    sw.pipeline.pre.mc_group_modify(100 + JOB, [Replica(1, JOB * 64 + 1), Replica(2, 999)])
    out = dict(contribute(sw, hosts, [0, 0], dest=1))
    assert parse_frame(out[2]).values == ()       # port 2's copy has no replica entry: an ACK
    assert parse_frame(out[1]).values == ()       # rank 0 does not own dest 1


# ---- a tree: the root sends the values to every leaf, each leaf decides per worker --------

UP_PORT = 10
ROOT_SVC = Host(0, "02:00:00:00:ff:fe", "10.255.0.254", UDP_PORT)


def leaf_svc(j: int) -> Host:
    return Host(j + 1, f"02:00:00:00:{j + 1:02x}:fe", f"10.{j + 1}.0.254", UDP_PORT)


def test_in_a_tree_the_leaves_strip_per_worker() -> None:
    """Two leaves of two workers (ranks 0, 1 | 2, 3), dest 3: the root's copies to both leaves
    keep the values (leaves are RANK_SWITCH); leaf 1 gives rank 3 the values and rank 2 an ACK;
    leaf 0 gives both its workers ACKs.  NONFINITE from rank 0 reaches every copy."""
    config = netsum_config()
    root = NetsumSwitch(config)
    root.add_job(JOB, [leaf_svc(0), leaf_svc(1)], num_slots=8, job_workers=4,
                 ranks=[RANK_SWITCH, RANK_SWITCH])
    leaves, workers = [], []
    for j in range(2):
        sw = NetsumSwitch(config)
        hs = [Host(i + 1, f"02:00:00:{j + 1:02x}:00:{i + 1:02x}", f"10.{j + 1}.0.{i + 1}",
                   41000 + i) for i in range(2)]
        sw.add_job_leaf(JOB, slot_base=0, num_slots=8, num_workers=2, mgid=50, up_port=UP_PORT,
                        leaf=leaf_svc(j), up=ROOT_SVC, job_workers=4)
        for i, h in enumerate(hs):
            sw.add_member(JOB, h, i, 2 * j + i)
        sw.add_result_group(50, hs, rid_base=1, ranks=[2 * j, 2 * j + 1])
        sw.allow_results(JOB, [h.port for h in hs])
        leaves.append(sw)
        workers.append(hs)
    partials = []
    for j in range(2):
        for i, h in enumerate(workers[j]):
            out = leaves[j].send(h.port, netsum_frame(
                h, job_id=JOB, slot=0, values=vals(2 * j + i), exp=125, dest=3,
                flags=NF if (j, i) == (0, 0) else 0, dst_mac=leaf_svc(j).mac,
                dst_ip=leaf_svc(j).ip))
        (port, partial), = out
        assert port == UP_PORT and parse_frame(partial).header["flags"] == (NF if j == 0 else 0)
        partials.append(partial)
    root.send(1, partials[0])
    down = dict(root.send(2, partials[1]))
    total = vec_sum([vals(r) for r in range(4)])
    for j in range(2):
        p = parse_frame(down[j + 1])                   # the root's copy to leaf j: values kept
        assert (p.values, p.header["flags"], p.header["dest"]) == (total, NF, 3)
        got = dict(leaves[j].send(UP_PORT, down[j + 1]))
        for i, h in enumerate(workers[j]):
            q = parse_frame(got[h.port])
            if 2 * j + i == 3:
                assert (q.values, q.header["flags"]) == (total, NF)
            else:
                assert q.values == () and q.header["flags"] == int(Flags.ACK) | NF
