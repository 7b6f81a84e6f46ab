"""netsum.p4 (protocol v2) on the embedded switch: a member whose DATA disagrees with its job or
with its round gets a header-only REJECT naming why, nothing of the slot changes, and the job's
last refusal rides on the STATUS replies the other members get (issue 25 point 2); and
(issue 23, speculative exponents) a DATA's `reason` byte is qexp, the exponent its values are
quantized with, which every contribution of a round must share.

Frames in, frames out; every expectation is derived here from the packets sent and
docs/protocol.md ("Refusals"): the REJECT is the DATA's header turned around, msg_type 4,
`reason` set and the field the reason names holding the switch's value.
"""
from __future__ import annotations

import pytest

from p4helpers import (DEFAULT_LENGTH, Host, NetsumSwitch, Parsed, netsum_config, netsum_frame,
                       one_reply, parse_frame, vec_sum, worker_host)
from netsum.wire import DEST_ALL, HEADER_BYTES, K_DEFAULT, MsgType, Reason

JOB = 6
SLOT_BASE = 2
REGISTERS = ("bitmap", "contributions", "max_exp", "held_length", "held_offset", "held_dest",
             "held_qexp", "nonfinite", "val000", f"val{K_DEFAULT - 1:03d}")


def make_switch(n: int = 4, k: int = K_DEFAULT) -> tuple[NetsumSwitch, list[Host]]:
    sw = NetsumSwitch(netsum_config(k))
    hosts = [worker_host(i) for i in range(n)]
    sw.add_job(JOB, hosts, slot_base=SLOT_BASE, num_slots=8)
    return sw, hosts


def vals(w: int, k: int = K_DEFAULT) -> list[int]:
    return [100 * w + lane for lane in range(k)]


def data(h: Host, w: int, *, slot: int = 1, round_: int = 0, k: int = K_DEFAULT,
         **kw: int) -> bytes:
    kw.setdefault("offset", 64 * slot)
    return netsum_frame(h, job_id=JOB, slot=slot, round=round_, values=vals(w, k), exp=120 + w,
                        **kw)


def slot_state(sw: NetsumSwitch, slot: int = 1, set_: int = 0) -> dict[str, int]:
    i = (SLOT_BASE + slot) * 2 + set_
    return {r: sw.register(r, i) for r in REGISTERS}


def check_reject(p: Parsed, *, reason: Reason, slot: int = 1, round_: int = 0,
                 **fields: int) -> None:
    """A REJECT: the refused DATA's header with msg_type 4, the reason, the field it names
    replaced; the header alone (IPv4 and UDP lengths say so, the checksum is right)."""
    h = p.header
    assert (h["msg_type"], h["reason"], h["job_id"], h["slot"], h["round"]) == \
        (MsgType.REJECT, reason, JOB, slot, round_)
    assert (h["flags"], h["count"]) == (0, 0)
    for name, value in fields.items():
        assert h[name] == value, name
    assert p.values == ()
    assert (p.ip_len, p.udp_len) == (20 + 8 + HEADER_BYTES, 8 + HEADER_BYTES)
    assert p.ip_checksum_ok


def test_a_member_with_another_member_count_is_refused_at_once() -> None:
    """issue 25's case: rank 0 says 8 workers in a 4-member job.  REJECT(WORKERS) carrying the
    job's 4; nothing added; counted; the job's refusal recorded (reason, rank 0's bit)."""
    sw, hosts = make_switch()
    before = slot_state(sw)
    p = one_reply(sw.send(hosts[0].port, data(hosts[0], 0, workers=8)), hosts[0])
    check_reject(p, reason=Reason.WORKERS, workers=4, length=DEFAULT_LENGTH, dest=DEST_ALL)
    assert slot_state(sw) == before
    assert sw.counter("reject_workers", JOB) == 1
    assert (sw.register("last_refusal", JOB), sw.register("last_refused_bit", JOB)) == \
        (Reason.WORKERS, 0b0001)


@pytest.mark.parametrize("k, switch_k", [(32, 256), (256, 32), (64, 128), (256, 1024), (1024, 256),
                                        (2048, 1024)])
def test_a_sender_of_another_k_gets_reject_k(k: int, switch_k: int) -> None:
    """A worker built for K=k against a K=switch_k program: its frame is too short (or too
    long) for the switch's values header, its netsum header parses: REJECT(K) carrying the
    switch's log2 K, whatever the frame's size.  Bytes the parser did not take stay behind
    the IPv4 datagram (Ethernet padding, trimmed by every receiver)."""
    sw, hosts = make_switch(k=switch_k)
    frame = data(hosts[1], 1, k=k)
    assert parse_frame(frame, k).header["klog2"] == k.bit_length() - 1
    p = one_reply(sw.send(hosts[1].port, frame), hosts[1], k=switch_k)
    check_reject(p, reason=Reason.K, klog2=switch_k.bit_length() - 1, workers=4)
    # the values the switch could not parse (k < switch_k) or did not keep (k > switch_k)
    assert p.trailing == (4 * k if k < switch_k else 4 * (k - switch_k))
    assert sw.counter("reject_k", JOB) == 1 and sw.counter("drop_malformed", JOB) == 0
    assert sw.register("bitmap", (SLOT_BASE + 1) * 2) == 0


def test_cut_values_of_this_k_are_still_malformed() -> None:
    """klog2 says this build's K but the values are cut short: a broken frame, not a
    disagreement (dropped, no reply)."""
    sw, hosts = make_switch()
    frame = data(hosts[0], 0)
    assert sw.send(hosts[0].port, frame[:-4]) == []
    assert sw.counter("drop_malformed", JOB) == 1 and sw.counter("reject_k", JOB) == 0


@pytest.mark.parametrize("field, first, second, reason", [
    ("length", 1000, 2000, Reason.LENGTH),          # a shorter/longer tensor
    ("offset", 64, 96, Reason.OFFSET),              # another slot count: other chunks meet
    ("dest", DEST_ALL, 2, Reason.DEST),             # all-reduce vs reduce-scatter
    ("dest", 1, 3, Reason.DEST),                    # two reduce-scatters, other shards
])
def test_a_round_refuses_what_its_first_contribution_disagrees_with(
        field: str, first: int, second: int, reason: Reason) -> None:
    """Two members contribute to one round; the second says another `field` than the first:
    REJECT carrying the round's value; the round keeps the first alone; a third member that
    agrees still adds."""
    sw, hosts = make_switch()
    assert sw.send(hosts[0].port, data(hosts[0], 0, **{field: first})) == []
    after_first = slot_state(sw)
    p = one_reply(sw.send(hosts[1].port, data(hosts[1], 1, **{field: second})), hosts[1])
    check_reject(p, reason=reason, **{field: first})
    assert slot_state(sw) == after_first
    assert sw.counter(f"reject_{reason.name.lower()}", JOB) == 1
    assert sw.send(hosts[2].port, data(hosts[2], 2, **{field: first})) == []
    assert sw.register("bitmap", (SLOT_BASE + 1) * 2) == 0b0101


def test_dest_beyond_the_jobs_ranks_is_refused() -> None:
    sw, hosts = make_switch()
    p = one_reply(sw.send(hosts[3].port, data(hosts[3], 3, dest=4)), hosts[3])
    check_reject(p, reason=Reason.DEST, dest=4, workers=4)
    assert sw.counter("reject_dest", JOB) == 1
    # 0xFE is no rank either; 0xFF (DEST_ALL) and 0..3 are accepted
    p = one_reply(sw.send(hosts[3].port, data(hosts[3], 3, dest=0xFE)), hosts[3])
    check_reject(p, reason=Reason.DEST, dest=0xFE)
    assert sw.send(hosts[3].port, data(hosts[3], 3, dest=3)) == []


def test_a_later_round_starts_with_its_own_first_contribution() -> None:
    """What a round records is its own: a newer round in the set starts over (its first
    contribution may say another length), and the next round's members must agree with that."""
    sw, hosts = make_switch(2)
    for w in (0, 1):
        sw.send(hosts[w].port, data(hosts[w], w, length=500))
    assert sw.send(hosts[0].port, data(hosts[0], 0, round_=2, length=700)) == []
    assert sw.register("held_length", (SLOT_BASE + 1) * 2) == 700
    out = sw.send(hosts[1].port, data(hosts[1], 1, round_=2, length=700))
    assert len(out) == 2 and {parse_frame(f).header["length"] for _, f in out} == {700}


def test_rejects_go_to_members_only() -> None:
    """A non-member saying the wrong count learns nothing: dropped as a non-member before any
    agreement check (no REJECT, no refusal recorded)."""
    sw, _ = make_switch()
    rogue = worker_host(9, port=9)
    assert sw.send(rogue.port, data(rogue, 0, workers=8)) == []
    assert sw.counter("drop_non_member", JOB) == 1 and sw.counter("reject_workers", JOB) == 0
    assert sw.register("last_refusal", JOB) == 0


def test_a_reject_is_subject_to_result_port() -> None:
    """Egress treats a REJECT as a RESULT: a member port without a result_port entry for the
    job gets nothing (counted as drop_result_port)."""
    sw = NetsumSwitch(netsum_config())
    hosts = [worker_host(i) for i in range(2)]
    sw.add_job_root(JOB, SLOT_BASE, 8, 2, 77)
    for i, h in enumerate(hosts):
        sw.add_member(JOB, h, i)
    sw.allow_results(JOB, [hosts[1].port])          # none for port 1
    assert sw.send(hosts[0].port, data(hosts[0], 0, workers=3)) == []
    assert sw.counter("reject_workers", JOB) == 1
    assert sw.counter("drop_result_port", JOB) == 1


def test_the_others_learn_the_refusal_from_status() -> None:
    """Rank 2 is refused (WORKERS); ranks 0 and 1 contributed and re-send: their STATUS says
    bitmap 0b0011 and, in reason and length, the job's last refusal: WORKERS, rank 2's bit.
    Without a refusal, reason and length are 0."""
    sw, hosts = make_switch()
    for w in (0, 1):
        sw.send(hosts[w].port, data(hosts[w], w))
    quiet = one_reply(sw.send(hosts[0].port, data(hosts[0], 0, flags=1)), hosts[0])
    assert (quiet.header["msg_type"], quiet.header["reason"], quiet.header["length"]) == \
        (MsgType.STATUS, 0, 0)
    one_reply(sw.send(hosts[2].port, data(hosts[2], 2, workers=5)), hosts[2])
    st = one_reply(sw.send(hosts[1].port, data(hosts[1], 1, flags=1)), hosts[1])
    assert st.header["msg_type"] == MsgType.STATUS and st.values[0] == 0b0011
    assert (st.header["reason"], st.header["length"]) == (Reason.WORKERS, 0b0100)


def test_a_new_registration_forgets_the_refusal() -> None:
    """The refusal is tagged with the job's owner tag: after the controller gives the job a new
    epoch, STATUS replies carry none (the earlier run's refusal is not this run's)."""
    sw, hosts = make_switch()
    one_reply(sw.send(hosts[3].port, data(hosts[3], 3, workers=5)), hosts[3])
    sw.set_epoch(JOB, 1)
    sw.send(hosts[0].port, data(hosts[0], 0))
    st = one_reply(sw.send(hosts[0].port, data(hosts[0], 0, flags=1)), hosts[0])
    assert st.header["msg_type"] == MsgType.STATUS
    assert (st.header["reason"], st.header["length"]) == (0, 0)


def test_agreeing_members_sum_exactly_after_a_refusal() -> None:
    """A refusal changes nothing for the members that agree: once the refused member sends
    what the job expects, the round completes with the exact sum."""
    sw, hosts = make_switch(3)
    sw.send(hosts[0].port, data(hosts[0], 0))
    one_reply(sw.send(hosts[1].port, data(hosts[1], 1, length=5)), hosts[1])
    sw.send(hosts[2].port, data(hosts[2], 2))
    out = sw.send(hosts[1].port, data(hosts[1], 1))
    assert sorted(p for p, _ in out) == [1, 2, 3]
    assert {parse_frame(f).values for _, f in out} == {vec_sum([vals(w) for w in range(3)])}


# ---- qexp (issue 23): every contribution of a round quantized with one exponent ----
# A DATA's byte 18 (`reason`) is qexp; values below are small integers, so "quantized with
# qexp" is only a label here: what the switch must do follows from docs/protocol.md,
# "Speculative exponents", not from the values.

def test_contributions_of_one_qexp_are_summed_and_the_result_carries_it() -> None:
    """Four members, all quantized with 130: the exact sum, `exp` the max proposal (123), and
    byte 18 of every RESULT copy the round's qexp 130; nothing refused."""
    sw, hosts = make_switch()
    for w in range(3):
        assert sw.send(hosts[w].port, data(hosts[w], w, reason=130)) == []
    out = sw.send(hosts[3].port, data(hosts[3], 3, reason=130))
    assert sorted(port for port, _ in out) == [1, 2, 3, 4]
    for _, frame in out:
        h = parse_frame(frame).header
        assert (h["msg_type"], h["reason"], h["exp"], h["count"]) == (MsgType.RESULT, 130, 123, 4)
        assert parse_frame(frame).values == vec_sum([vals(w) for w in range(4)])
    assert sw.counter("reject_qexp", JOB) == 0
    assert sw.register("held_qexp", (SLOT_BASE + 1) * 2) == 130


@pytest.mark.parametrize("first, second", [(130, 131), (131, 130), (0, 130), (130, 0)])
def test_a_contribution_of_another_qexp_is_refused_with_the_rounds(first: int,
                                                                    second: int) -> None:
    """Rank 0 starts the round with qexp `first`, rank 1 sends `second`: a REJECT(QEXP) to rank
    1 alone whose `exp` is the round's qexp (not rank 1's proposal 121 nor its qexp), the
    other fields as rank 1 sent them; the slot as rank 0 left it; counted in reject_qexp and
    kept as the job's refusal with rank 1's bit.  (0 = EXP_ZERO: a bootstrap use's zeros
    meeting data, either way round.)"""
    sw, hosts = make_switch()
    assert sw.send(hosts[0].port, data(hosts[0], 0, reason=first)) == []
    after_first = slot_state(sw)
    p = one_reply(sw.send(hosts[1].port, data(hosts[1], 1, reason=second)), hosts[1])
    check_reject(p, reason=Reason.QEXP, exp=first, offset=64, dest=DEST_ALL, workers=4,
                 length=DEFAULT_LENGTH)
    assert slot_state(sw) == after_first
    assert sw.counter("reject_qexp", JOB) == 1
    for other in ("reject_length", "reject_offset", "reject_dest", "reject_workers"):
        assert sw.counter(other, JOB) == 0, other
    assert (sw.register("last_refusal", JOB), sw.register("last_refused_bit", JOB)) == \
        (Reason.QEXP, 0b0010)


def test_after_a_qexp_refusal_the_round_completes_with_the_right_ones() -> None:
    """Rank 1 refused (131 in a round of 130); rank 0, waiting, re-sends and its STATUS names
    the refusal (reason 7, rank 1's bit) and the bitmap 0b0001; rank 1 then sends with 130
    and, with ranks 2 and 3, the round completes with the exact sum of all four and qexp 130."""
    sw, hosts = make_switch()
    sw.send(hosts[0].port, data(hosts[0], 0, reason=130))
    one_reply(sw.send(hosts[1].port, data(hosts[1], 1, reason=131)), hosts[1])
    st = one_reply(sw.send(hosts[0].port, data(hosts[0], 0, reason=130, flags=1)), hosts[0])
    assert st.header["msg_type"] == MsgType.STATUS and st.values[0] == 0b0001
    assert (st.header["reason"], st.header["length"], st.header["count"]) == \
        (Reason.QEXP, 0b0010, 1)
    for w in (1, 2):
        assert sw.send(hosts[w].port, data(hosts[w], w, reason=130)) == []
    out = sw.send(hosts[3].port, data(hosts[3], 3, reason=130))
    assert sorted(port for port, _ in out) == [1, 2, 3, 4]
    assert {parse_frame(f).values for _, f in out} == {vec_sum([vals(w) for w in range(4)])}
    assert {parse_frame(f).header["reason"] for _, f in out} == {130}
    assert sw.counter("reject_qexp", JOB) == 1


def test_a_duplicate_of_an_added_contribution_is_not_compared_again() -> None:
    """Rank 0's contribution (qexp 130) was added; its retransmission is a duplicate before
    anything else: a STATUS while the round waits (no REJECT, even if its byte 18 were
    another), the stored RESULT with the round's qexp 130 once the round is done; never
    counted as a refusal."""
    sw, hosts = make_switch(2)
    sw.send(hosts[0].port, data(hosts[0], 0, reason=130))
    for q in (130, 131):
        st = one_reply(sw.send(hosts[0].port, data(hosts[0], 0, reason=q, flags=1)), hosts[0])
        assert (st.header["msg_type"], st.header["reason"], st.values[0]) == \
            (MsgType.STATUS, 0, 0b01)
    assert len(sw.send(hosts[1].port, data(hosts[1], 1, reason=130))) == 2
    for q in (130, 131):     # the replayed RESULT says the round's qexp, not the duplicate's
        again = one_reply(sw.send(hosts[0].port, data(hosts[0], 0, reason=q, flags=1)),
                          hosts[0])
        assert (again.header["msg_type"], again.header["reason"]) == (MsgType.RESULT, 130)
        assert again.values == vec_sum([vals(0), vals(1)])
    assert sw.counter("reject_qexp", JOB) == 0 and sw.counter("retransmissions", JOB) == 4


def test_each_round_records_its_own_qexp() -> None:
    """Round 0 ran with 130; round 2 (the same set) starts with its first contribution's 128 and
    refuses a 130 then, accepting 128."""
    sw, hosts = make_switch(2)
    for w in (0, 1):
        sw.send(hosts[w].port, data(hosts[w], w, reason=130))
    assert sw.send(hosts[0].port, data(hosts[0], 0, round_=2, reason=128)) == []
    assert sw.register("held_qexp", (SLOT_BASE + 1) * 2) == 128
    p = one_reply(sw.send(hosts[1].port, data(hosts[1], 1, round_=2, reason=130)), hosts[1])
    check_reject(p, reason=Reason.QEXP, round_=2, exp=128)
    out = sw.send(hosts[1].port, data(hosts[1], 1, round_=2, reason=128))
    assert {parse_frame(f).header["reason"] for _, f in out} == {128} and len(out) == 2
