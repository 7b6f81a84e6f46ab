"""Loss recovery of the worker core (workers/core.py): retransmission timers with backoff, fast
retransmit on a gap (RACK's reordering window) and the congestion window's cut on a loss.
docs/protocol.md, "Loss recovery", says why each is as it is.

A base class of `WorkerCore`, which owns the state named below (it sets all of it up in its
constructor) and `_keep` (a row about to change under a frame queued earlier in the call).
"""
from __future__ import annotations

from collections import deque

import numpy as np

from netsum.wire import Flags
from netsum.workers.coretypes import Event, Retransmitted, Timing
from netsum.workers.window import TxWindow

__all__ = ["LossRecovery", "IDLE", "SLOT_BITS", "SLOT_MASK"]

IDLE = -1 << 62  # cur_block value of a slot with nothing in flight
SLOT_BITS = 16   # fast-retransmit queue entries are seq << 16 | slot (slots < 2^16)
SLOT_MASK = (1 << SLOT_BITS) - 1
_RETX = int(Flags.RETX)


class LossRecovery:
    """Timers, fast retransmit and the window cut, over the core's per-slot state."""

    # Per slot (index: slot): the block in flight (IDLE: none), its RTO, retransmission
    # timer, attempts, transmission sequence number and time, and which call queued it where.
    _cur_block: list[int]
    _rto: list[float]
    _timer: np.ndarray
    _attempts: list[int]
    _seq: list[int]
    _tx_at: list[float]
    _qcall: list[int]
    _qpos: list[int]
    _tmin: float
    _call: int
    _w: int
    _win: TxWindow
    _ev: list[Event] | None
    _timing: Timing
    # transmissions, retransmissions, fast ones; the unanswered queue and the gap count
    _tx: int
    _sent: int
    _retx: int
    _fast: int
    _fr: int
    _unanswered: deque[int]
    _gap_seq: int
    _gap: int
    # round trips and the congestion window
    _min_rtt: float
    _srtt: float | None
    _base_rto: float
    _adaptive: bool
    _cwnd: float
    _ssthresh: float
    _last_cut: float

    def _keep(self, i: int, out: list[int]) -> None:
        raise NotImplementedError

    def _expire(self, now: float, out: list[int]) -> None:
        """Retransmit the uses whose timer is due (at most cwnd of them when adaptive, oldest
        first), each with its RTO doubled up to rto_max."""
        t = self._timing
        timer = self._timer
        due = np.flatnonzero(timer <= now)
        if len(due) and self._adaptive:
            self._loss_signal(now)
            allowed = max(1, int(self._cwnd))
            if len(due) > allowed:
                # Oldest first; the rest wait an RTO more without counting as an attempt, so
                # a cut window is not undone by a burst of retransmissions.
                due = due[np.argsort(timer[due], kind="stable")]
                timer[due[allowed:]] = now + self._base_rto
                due = due[:allowed]
        rto = self._rto
        for i in due.tolist():
            rto[i] = min(rto[i] * t.backoff, t.rto_max)
            timer[i] = now + rto[i]
            self._retransmit(i, now, False, out)
        self._tmin = float(timer.min())

    def _gap_check(self, seq: int, rtt: float, now: float, out: list[int]) -> None:
        """An accepted result of transmission `seq`, `rtt` after it was sent: if the oldest
        unanswered transmission is older, one more result has passed it.  It is sent again
        once `fast_retransmit` results have passed it and it has waited longer than the
        passing one's round trip plus a quarter of the least round trip seen (RACK's
        reordering window, RFC 8985): uses sent in one burst come back in any order, and
        that alone must not look like a loss.  The count restarts when the oldest changes,
        which only delays the next detection; the timer still covers what this misses."""
        q, cur, seqs = self._unanswered, self._cur_block, self._seq
        while q:
            e = q[0]
            s, j = e >> SLOT_BITS, e & SLOT_MASK
            if cur[j] != IDLE and seqs[j] == s:
                break
            q.popleft()
        else:
            return
        if s > seq:
            return
        if s != self._gap_seq:
            self._gap_seq, self._gap = s, 0
        self._gap += 1
        if self._gap < self._fr or now - self._tx_at[j] < rtt + self._min_rtt / 4:
            return
        q.popleft()
        self._fast += 1
        if self._adaptive:
            self._loss_signal(now)
        # Not a timeout: the slot's RTO keeps its value (no backoff), restarted from now.
        t = now + self._rto[j]
        self._timer[j] = t
        if t < self._tmin:
            self._tmin = t
        self._retransmit(j, now, True, out)

    def _loss_signal(self, now: float) -> None:
        """A loss was found (timeout or gap): halve cwnd, at most once per smoothed RTT (the
        losses of one burst are all found within about an RTT), never below `window_min`.
        Random loss and a switch's overflowing socket buffer look alike to a worker (tried:
        a standing-queue test on the RTT misses the overflow, whose first samples are already
        queued), so every loss episode cuts, as in TCP; what keeps random loss cheap is the
        floor: with `window_min` (16) uses in flight, enough later results come back for fast
        retransmit to find the next loss, where a window of 2 left every loss to the timer."""
        if now - self._last_cut < (self._srtt or self._base_rto):
            return
        self._ssthresh = max(self._cwnd / 2, float(min(self._timing.window_min, self._w)))
        self._cwnd = self._ssthresh
        self._last_cut = now

    def _retransmit(self, i: int, now: float, fast: bool, out: list[int]) -> None:
        if self._qcall[i] == self._call:
            self._keep(i, out)
        self._attempts[i] += 1   # Karn: no RTT sample from this slot use any more
        # The transmission's sequence number (as a launch gives one) and its place in `out`.
        self._tx_at[i] = now
        self._tx += 1
        self._seq[i] = self._tx
        if self._fr:
            self._unanswered.append(self._tx << SLOT_BITS | i)
        self._sent += 1
        self._retx += 1
        self._win.set_flag(i, _RETX)
        if self._ev is not None:
            self._ev.append(Retransmitted(i, int(self._cur_block[i]), self._attempts[i], fast))
        self._qcall[i] = self._call
        self._qpos[i] = len(out)
        out.append(i)
