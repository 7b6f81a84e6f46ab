"""The worker core's slot table (workers/slots.py): a slot's life by hand (launch, resend,
accept), a duplicate told from a stale packet by the round before the slot's (across the
round's wrap at 2^32), the timers' lower bound, and the rounds a core hands on: from the
table, the compiled core's included (mirrored into it)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from netsum.wire import Flags, MsgType
from netsum.workers import wire
from netsum.workers.core import JobConfig, Timing, WorkerCore
from netsum.workers.native import NativeCore, native_status
from netsum.workers.slots import IDLE, SLOT_BITS, SlotTable

LAST = (1 << 32) - 1     # the largest round


def test_a_slot_use_by_hand() -> None:
    """Slot 1 of 3 (job rounds 7, LAST, 9, 4: the fourth slot is not in this window) carries
    block 4 (4 mod 3 = 1) at offset 160 from t=1.0 with RTO 0.2: in flight with round LAST; sent again at
    1.3 (attempt 1, transmission 2); accepted: idle, round 0, and (LAST, 160) is then its
    duplicate while (LAST, 128) and (0, 160) are not."""
    rounds = [7, LAST, 9, 4]
    t = SlotTable(3, rounds, 0.5, log_sends=True)
    assert t.next_rounds() == (7, LAST, 9, 4)
    assert t.current(1, LAST, 0) == IDLE and t.use(1) is None
    t.launch(1, 4, 160, 1.0, 0.2, call=3, pos=0)
    assert (t.block, t.in_flight, t.tmin) == ([IDLE, 4, IDLE], 1, pytest.approx(1.2))
    assert t.current(1, LAST, 160) == 4 and t.use(1) == (4, LAST, 160)
    assert t.current(1, LAST, 128) == IDLE and t.current(1, 0, 160) == IDLE
    assert t.waiting() == [1] and t.lowest_in_flight(99) == 4
    assert list(t.due(1.2)) == [1] and list(t.due(1.19)) == []
    t.resend(1, 1.3, call=4, pos=2)
    assert (t.attempts[1], t.seq[1], t.tx_at[1], t.qcall[1], t.qpos[1]) == (1, 2, 1.3, 4, 2)
    assert t.first_sent[1] == 1.0
    assert list(t.sent or ()) == [1 << SLOT_BITS | 1, 2 << SLOT_BITS | 1]
    assert t.accept(1) == 160
    assert (t.block[1], t.in_flight, t.timer[1]) == (IDLE, 0, math.inf)
    assert rounds == [7, 0, 9, 4] and t.next_rounds() == (7, 0, 9, 4)   # one list, wrapped
    assert t.duplicate(1, LAST, 160)
    assert not t.duplicate(1, LAST, 128) and not t.duplicate(1, 0, 160)
    assert not t.duplicate(0, 6, 0)      # slot 0: nothing accepted (round 7: 6 is before)
    assert t.waiting() == [] and t.lowest_in_flight(99) == 99


def test_timers_lower_bound() -> None:
    """tmin is never above a timer: `arm` lowers it, `retime` makes it exact after timers
    moved later."""
    t = SlotTable(3, [0, 0, 0], 1.0, log_sends=False)
    t.launch(0, -3, 0, 0.0, 1.0, 1, 0)
    t.launch(2, -1, 64, 0.0, 1.0, 1, 1)
    assert t.tmin == 1.0 and t.sent is None
    t.arm(2, 0.5)
    assert t.tmin == 0.5
    t.arm(2, 3.0)
    assert t.tmin == 0.5       # a lower bound still
    t.retime()
    assert t.tmin == 1.0
    assert list(t.due(1.0)) == [0]


def _echo(payload: bytes, k: int) -> bytes:
    """A one-worker job's switch: the result is the contribution, count 1."""
    pkt = wire.decode(payload, k)
    h = pkt.header
    head = wire.Header(msg_type=MsgType.RESULT, flags=Flags.NONE, job_id=h.job_id,
                       round=h.round, slot=h.slot, exp=h.exp, count=1, offset=h.offset)
    return wire.encode(head, pkt.values, k)


@pytest.mark.parametrize("native", [False, True])
def test_the_rounds_a_core_hands_on(native: bool) -> None:
    """Job of 4 slots starting at rounds (LAST, 5, 6, 7), 2 blocks of K=32: slots 0 and 1 are
    used twice (bootstrap and a block), so they go to (1, 7); 2 and 3 keep theirs.  Before
    start() the core hands on what it was given (the compiled core's own rounds are not set
    before its start: the mirror must not take them)."""
    if native and not native_status()[0]:
        pytest.skip(f"no compiled worker core: {native_status()[1]}")
    k = 32
    cls = NativeCore if native else WorkerCore
    core = cls(np.ones(2 * k, np.float32), JobConfig(3, 1, 4, k), Timing(),
               rounds=[LAST, 5, 6, 7])
    assert core.next_rounds() == (LAST, 5, 6, 7)
    pending = list(core.start(0.0).send)
    assert [wire.decode_header(p, k).round for p in pending] == [LAST, 5]
    while pending:
        pending += core.receive(_echo(pending.pop(0), k), 0.001).send
    res = core.result()
    assert res.next_rounds == core.next_rounds() == (1, 7, 6, 7)
    assert res.stats.duplicates == 0
