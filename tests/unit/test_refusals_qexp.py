"""workers/refusals.py for REJECT(QEXP) (issue 23): whether a REJECT of reason 7 is about this
worker's DATA, and the error and the survivors' line it gives.

The REJECT's header is built here by hand as netsum.p4's reject_qexp_pkt leaves it (the
refused DATA's header, msg_type 4, reason 7, `exp` = the round's qexp; docs/protocol.md,
"Refusals"), and the use in flight as the worker core's `_refused` describes it (round,
offset, dest and the qexp the use carried in byte 18).  Expectations follow from the design:
the REJECT applies iff a use of that round is in flight and its qexp differs from the round's.
"""
from __future__ import annotations

import pytest

from netsum.wire import DEST_ALL, EXP_ZERO, REASON_FIELD, MsgType, Reason
from netsum.workers.errors import RejectedError
from netsum.workers.refusals import applies, describe_reason, rejected_error
from netsum.workers.status import StatusBook

JOB, SLOT, ROUND, OFFSET = 5, 3, 9, 768
CONFIG = {"workers": 4, "k": 256, "length": 4096, "window": 8}


def reject(round_exp: int, *, round_: int = ROUND) -> dict[str, int]:
    """The REJECT(QEXP) a worker gets for its DATA of (SLOT, round_) at OFFSET: its header with
    msg_type 4, reason 7, `exp` replaced by the round's qexp."""
    return {"msg_type": MsgType.REJECT, "flags": 0, "job_id": JOB, "slot": SLOT,
            "exp": round_exp, "count": 0, "round": round_, "offset": OFFSET, "workers": 4,
            "dest": DEST_ALL, "reason": Reason.QEXP, "klog2": 8, "length": 4096}


def use(qexp: int, *, round_: int = ROUND) -> dict[str, int]:
    return {"round": round_, "offset": OFFSET, "dest": DEST_ALL, "qexp": qexp}


def test_the_wire_names_exp_as_the_field_of_a_qexp_reject() -> None:
    assert int(Reason.QEXP) == 7 and REASON_FIELD[Reason.QEXP] == "exp"


@pytest.mark.parametrize("fields, in_flight, expected", [
    (reject(130), use(131), True),               # it quantized with 131, the round with 130
    (reject(131), use(130), True),
    (reject(EXP_ZERO), use(130), True),          # data meeting a round of bootstrap zeros
    (reject(130), use(EXP_ZERO), True),          # zeros meeting a round of data
    (reject(130), use(130), False),              # its own qexp: not about what it sent
    (reject(130), use(131, round_=ROUND + 1), False),   # another round than the one in flight
    (reject(130), None, False),                  # nothing in flight on the slot
])
def test_a_qexp_reject_applies_iff_the_use_in_flight_carried_another_qexp(
        fields: dict[str, int], in_flight: dict[str, int] | None, expected: bool) -> None:
    assert applies(fields, use=in_flight, **CONFIG) is expected


def test_the_error_names_both_exponents_the_slot_and_the_round() -> None:
    err = rejected_error(reject(130), job_id=JOB, rank=2, workers=4, k=256, length=4096,
                         sent=dict(use(131), slot=7))
    assert isinstance(err, RejectedError)
    assert (err.reason, err.field, err.switch_value, err.ours) == (7, "exp", 130, 131)
    text = str(err)
    assert text.startswith(f"job {JOB}: refused by the switch (QEXP): rank 2 ")
    assert "quantized its values with exponent 131 (2^4)" in text
    assert "the round's other members with 130 (2^3)" in text
    assert f"job {JOB} slot {SLOT} round {ROUND}" in text
    assert "predictions differ" in text and "same `predict`" in text


def test_the_error_says_none_for_exp_zero_and_unknown_when_the_use_is_not_known() -> None:
    err = rejected_error(reject(EXP_ZERO), job_id=JOB, rank=None, workers=4, k=256,
                         length=4096, sent={})
    assert (err.switch_value, err.ours) == (EXP_ZERO, None)
    assert "this worker quantized its values with exponent ?" in str(err)
    assert "other members with 0 (none: zeros)" in str(err)


def test_the_survivors_learn_it_from_status() -> None:
    """describe_reason, and through it the waiting members' STATUS line (rank 1's bit)."""
    assert describe_reason(7).startswith("QEXP: ")
    assert "predictions differ" in describe_reason(7)
    book = StatusBook(4)
    book.refusal = (int(Reason.QEXP), 0b0010)
    line = book.refused()
    assert "refused rank 1's DATA (QEXP: " in line and "predictions differ" in line
