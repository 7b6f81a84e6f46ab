"""The worker core's slot table: everything the Python core (workers/core.py) knows about each
slot of its window, in one structure, and the operations that change a slot.

A slot i < w (w: the slots a call uses) is, at any time, either idle (`block[i] == IDLE`) or
carrying one use: a block (< 0 for a bootstrap use) sent with round `round[i]` and offset
`want[i]`, which the result must carry back.  Its life, one operation each:

* `launch`: a new use goes out (its first transmission): the block, offset, first send time,
  RTO and timer, attempts 0, and the transmission's stamp (below);
* `resend`: the use goes out again (a timer or a gap): one more attempt, a new stamp;
* `arm`: the use's timer moves (a retransmission's backoff, or the wait of a due use the window
  holds back);
* `accept`: the use's result was taken: the slot goes idle, remembers the use's offset (to tell
  a duplicate of that result from a stale packet) and moves on to its next round.

A transmission's stamp: its sequence number (every transmission of the call takes the next;
`seq[i]` is the slot's latest), when it went (`tx_at[i]`), which call of the frames API queued
it and where in that call's list (`qcall[i]`, `qpos[i]`: WorkerCore._keep), and, when fast
retransmit is on, an entry `seq << SLOT_BITS | i` appended to `sent` (the transmissions in send
order; workers/recovery.py drops the entries of slots answered or sent again since).

The round of a slot lives in `round` alone: the round of the use in flight, or of the slot's
next use when idle; the round of the last accepted use is the one before it (duplicates are
told by that and `acc_offset`), and `round` is what `WorkerCore.next_rounds()` returns, since
the table holds the rounds of every slot of the job (those past w: untouched by this call).
The round also sits in the slot's frame header (workers/window.py), written by each launch:
that is the packet, not the state.

Columns are lists indexed by slot (the hot path aliases them to locals once per call), except
the timers: one numpy array, so `due(now)` is one comparison; `tmin` is kept <= every timer,
so WorkerCore.next_deadline() needs no scan.  The compiled core's `Slot` (workers/wcore.c) is
the same table, one struct per slot.
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence

import numpy as np

from netsum.wire import ROUND_BITS

__all__ = ["SlotTable", "Rounds", "IDLE", "SLOT_BITS", "SLOT_MASK"]

IDLE = -1 << 62  # block of a slot with nothing in flight
SLOT_BITS = 16   # fast-retransmit queue entries are seq << 16 | slot (slots < 2^16)
SLOT_MASK = (1 << SLOT_BITS) - 1
_ROUND_MASK = (1 << ROUND_BITS) - 1


class Rounds(tuple[int, ...]):
    """What `SlotTable.next_rounds` returns: the rounds of a table that took only checked
    rounds and moved them itself, so a core that starts from them (the next call of the same
    job) need not check them again: at 256 slots the check is ~25 us of a call whose whole
    set-up is ~100 us (a 1-element all-reduce)."""
    __slots__ = ()


class SlotTable:
    """Per slot of a call's window of `w` slots (see the module); `rounds`: every slot of the
    job's next round (taken as the table's `round`, not copied); `rto`: the initial RTO;
    `log_sends`: keep `sent` (fast retransmit is on)."""

    __slots__ = ("w", "block", "round", "want", "acc_offset", "first_sent", "attempts", "rto",
                 "timer", "tmin", "seq", "tx_at", "qcall", "qpos", "in_flight", "tx", "sent",
                 "held", "_flying")

    def __init__(self, w: int, rounds: list[int], rto: float, log_sends: bool) -> None:
        self.w = w
        #: per slot: the block in flight (IDLE: none; < 0: a bootstrap use)
        self.block = [IDLE] * w
        #: per slot of the job: the round of the use in flight, or of the next use
        self.round = rounds
        #: per slot: the offset the use in flight's result must carry
        self.want = [0] * w
        #: per slot: the offset of the last accepted use (-1: none this call)
        self.acc_offset = [-1] * w
        #: per slot: when the use in flight was first sent, its attempts since, its RTO
        self.first_sent = [0.0] * w
        self.attempts = [0] * w
        self.rto = [rto] * w
        #: per slot: when it is due to be sent again (inf: idle)
        self.timer = np.full(w, np.inf)
        self.tmin = math.inf             # <= every timer
        #: per slot: its latest transmission's sequence number and time, the call that
        #: queued it and its place in that call's list
        self.seq = [0] * w
        self.tx_at = [0.0] * w
        self.qcall = [0] * w
        self.qpos = [0] * w
        self.in_flight = 0               # slots not idle
        self.tx = 0                      # transmissions so far (the last sequence number)
        #: seq << SLOT_BITS | slot of every transmission in send order (None: not kept)
        self.sent: deque[int] | None = deque() if log_sends else None
        #: per slot: a STATUS said the switch holds this worker's copy of the use in flight
        #: since its latest transmission (workers/recovery.py: its answer shows no loss)
        self.held = [False] * w
        # Heap of launched blocks, for the lowest block in flight; entries whose slot has
        # moved on (block[b % w] != b) are stale and dropped when they reach the top.
        self._flying: list[int] = []

    # -- the operations on a slot ------------------------------------------------------------

    def launch(self, i: int, block: int, offset: int, now: float, rto: float, call: int,
               pos: int) -> None:
        """Slot i's next use (block `block`, result offset `offset`) goes out at `now`, its
        timer `rto` later, queued by call `call` at `pos`."""
        self.block[i] = block
        heapq.heappush(self._flying, block)
        self.want[i] = offset
        self.first_sent[i] = now
        self.attempts[i] = 0
        self.rto[i] = rto
        t = now + rto
        self.timer[i] = t
        if t < self.tmin:
            self.tmin = t
        self.in_flight += 1
        self._sent(i, now, call, pos)

    def resend(self, i: int, now: float, call: int, pos: int) -> None:
        """Slot i's use goes out again (its timer is the caller's: `arm`)."""
        self.attempts[i] += 1   # Karn: no RTT sample from this use any more
        self._sent(i, now, call, pos)

    def _sent(self, i: int, now: float, call: int, pos: int) -> None:
        """Slot i's packet leaves now: its send sequence number and its place in the call's
        output (call, pos)."""
        self.tx_at[i] = now
        self.held[i] = False
        self.tx = tx = self.tx + 1
        self.seq[i] = tx
        if self.sent is not None:
            self.sent.append(tx << SLOT_BITS | i)
        self.qcall[i] = call
        self.qpos[i] = pos

    def arm(self, i: int, t: float) -> None:
        """Slot i's timer fires at `t`."""
        self.timer[i] = t
        if t < self.tmin:
            self.tmin = t

    def accept(self, i: int) -> int:
        """The result of slot i's use in flight was taken: the slot goes idle and on to its
        next round.  Returns the use's offset."""
        self.acc_offset[i] = offset = self.want[i]
        self.block[i] = IDLE
        self.timer[i] = math.inf
        self.in_flight -= 1
        self.round[i] = (self.round[i] + 1) & _ROUND_MASK
        return offset

    # -- questions ---------------------------------------------------------------------------

    def current(self, i: int, round_: int, offset: int) -> int:
        """The block of slot i's use in flight if (round_, offset) is that use's, else IDLE
        (`i` < w)."""
        block = self.block[i]
        if block != IDLE and round_ == self.round[i] and offset == self.want[i]:
            return block
        return IDLE

    def duplicate(self, i: int, round_: int, offset: int) -> bool:
        """Whether (round_, offset) is slot i's last accepted use (its round is the one
        before the slot's; `acc_offset` is -1, never an offset, before one)."""
        return offset == self.acc_offset[i] and round_ == (self.round[i] - 1) & _ROUND_MASK

    def due(self, now: float) -> np.ndarray:
        """The slots whose timer is due at `now`, ascending."""
        return np.flatnonzero(self.timer <= now)

    def retime(self) -> None:
        """`tmin` made exact again (after timers moved later)."""
        self.tmin = float(self.timer.min()) if self.w else math.inf

    def lowest_in_flight(self, default: int) -> int:
        """min(block of a slot in flight), or `default` when none is; amortised O(log w)
        instead of a scan of every slot per packet."""
        flying, cur, w = self._flying, self.block, self.w
        while flying:
            b = flying[0]
            if cur[b % w] == b:
                return b
            heapq.heappop(flying)
        return default

    def waiting(self) -> list[int]:
        """The slots with a use in flight."""
        cur = self.block
        return [i for i in range(self.w) if cur[i] != IDLE]

    def use(self, i: int) -> tuple[int, int, int] | None:
        """Slot i's use in flight as (block, round, offset), or None (idle, or not a slot of
        this window)."""
        if 0 <= i < self.w and self.block[i] != IDLE:
            return self.block[i], self.round[i], self.want[i]
        return None

    def next_rounds(self) -> Rounds:
        """Per slot of the job, the round its next use takes (see the module)."""
        return Rounds(self.round)

    def mirror(self, block: Sequence[int], round_: Sequence[int], want: Sequence[int]) -> None:
        """Take the in-flight state of slots 0..w-1 from another implementation of this table
        (the compiled core's, workers/native.py)."""
        self.block[:] = block
        self.round[:self.w] = round_
        self.want[:] = want
