"""tests/oracle.py's qexp (issue 23) against netsum.p4 on the embedded switch: the worker cores'
unit tests run on the oracle, so it must refuse, answer and complete a round of mixed qexp
exactly as the real program does.  One scripted exchange goes to both; every reply's netsum
payload (header and values) must be equal, and the hand-derived facts hold on both: the
REJECT(QEXP) carries the round's qexp in `exp`, the RESULT the round's qexp in byte 18.
"""
from __future__ import annotations

import struct

from oracle import OracleSwitch
from p4helpers import NetsumSwitch, netsum_config, netsum_frame, parse_frame, worker_host
from netsum.wire import HEADER_BYTES, K_DEFAULT, MsgType, Reason
from netsum.workers import wire

JOB, N, SLOT = 4, 3, 2


def payload(frame: bytes) -> bytes:
    """The netsum header and values of a frame (the UDP payload)."""
    p = parse_frame(frame)
    return wire.pack(**p.header) + struct.pack(f"!{len(p.values)}i", *p.values)


def test_the_oracle_answers_a_round_of_mixed_qexp_as_the_p4_program() -> None:
    hosts = [worker_host(i) for i in range(N)]
    sw = NetsumSwitch(netsum_config())
    sw.add_job(JOB, hosts, num_slots=4)
    oracle = OracleSwitch(k=K_DEFAULT, members={JOB: list(range(N))}, num_slots={JOB: 4})
    script = [  # (member, qexp, flags)
        (0, 130, 0),      # starts the round with 130
        (1, 131, 0),      # refused: REJECT(QEXP), exp 130
        (0, 130, 1),      # rank 0 waits: STATUS naming the refusal (reason 7, rank 1's bit)
        (1, 130, 0),      # rank 1 again, with the round's exponent: added
        (2, 130, 0),      # completes: RESULT to all three, byte 18 = 130
        (2, 131, 1),      # a duplicate of an added contribution: the stored RESULT
    ]
    replies = []
    for w, q, flags in script:
        frame = netsum_frame(hosts[w], job_id=JOB, slot=SLOT, offset=512,
                             values=[w * 1000 + i for i in range(K_DEFAULT)], exp=120 + w,
                             reason=q, flags=flags)
        real = sorted((port - 1, payload(f)) for port, f in sw.send(hosts[w].port, frame))
        model = sorted(oracle.process(w, frame[14 + 20 + 8:]))
        assert [(to, bytes(p)) for to, p in model] == real, (w, q, flags)
        replies.append(real)
    head = [[wire.unpack_fields(p) for _, p in r] for r in replies]
    assert [len(r) for r in replies] == [0, 1, 1, 0, 3, 1]
    assert (head[1][0]["msg_type"], head[1][0]["reason"], head[1][0]["exp"]) == \
        (MsgType.REJECT, Reason.QEXP, 130)
    assert (head[2][0]["msg_type"], head[2][0]["reason"], head[2][0]["length"]) == \
        (MsgType.STATUS, Reason.QEXP, 0b010)
    assert {(h["msg_type"], h["reason"], h["exp"]) for h in head[4]} == \
        {(MsgType.RESULT, 130, 122)}
    assert (head[5][0]["msg_type"], head[5][0]["reason"]) == (MsgType.RESULT, 130)
    assert len(replies[1][0][1]) == HEADER_BYTES
    assert oracle.refused == {Reason.QEXP: 1} and sw.counter("reject_qexp", JOB) == 1
