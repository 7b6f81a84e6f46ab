"""Loss recovery of the worker core (workers/core.py): the RTT estimate and RTO, retransmission
timers with backoff, fast retransmit on a gap (RACK's reordering window) and the congestion
window with its cut on a loss.  docs/protocol.md, "Loss recovery", says why each is as it is.

`LossRecovery` owns the estimator and the window and operates on the core's slot table
(workers/slots.py): it reads the slots' transmissions and moves their timers; it decides what
is sent again and the core sends it (WorkerCore._retransmit: the frame, the counters, the
events).

Held timers (`Timing.hold_timers`).  At 0 % loss a use waits for the slowest member: a peer
descheduled for tens of ms on shared cores, or one whose window opened later, holds every
use it has not sent.  A per-use timer cannot tell that from a loss, and fired for 4-7 % of
the packets, nearly all answered by a STATUS (the switch had this worker's copy:
docs/performance.md, sections 8 and 17).  So a due timer fires only through a gate:

* while results come in, the gate stays an RTO after the latest accepted one (TCP's one
  timer, restarted on every ACK, RFC 6298 5.3); a loss among flowing results is fast
  retransmit's to find, which sees every unanswered use in turn;
* after an RTO of silence one due use (the longest due) goes alone, a probe, and the gate
  moves an RTO on: while the switch answers each probe with a STATUS (it holds this
  worker's copy: a peer is late), a stalled peer costs one probe per RTO, not every
  waiting use per RTO;
* a probe with no answer at all by the next one's time, not even a STATUS, found this
  worker's copy missing at the switch (or the switch silent): a real loss, as below;
* a retransmitted use (a probe, or sent on a gap) answered by a RESULT with no STATUS for it
  since, later than the least round trip after the copy (so by that copy itself), shows a
  real loss: for an RTO the due timers fire as without the gate (up to cwnd at once, the
  window cut), so a tail of lost uses is recovered together, one round trip after the probe,
  and a lossy path recovers in parallel as before, where fast retransmit alone would find
  its losses one oldest use at a time.
"""
from __future__ import annotations

import math

import numpy as np

from netsum.workers.coretypes import Timing
from netsum.workers.slots import IDLE, SLOT_BITS, SLOT_MASK, SlotTable

__all__ = ["LossRecovery"]


class LossRecovery:
    """The loss recovery of one call over its slot table `slots`."""

    __slots__ = ("slots", "timing", "w", "adaptive", "cwnd", "ssthresh", "last_cut", "fr",
                 "gap_seq", "gap", "min_rtt", "srtt", "rttvar", "base_rto", "spurious",
                 "gate", "free_until", "probe")

    def __init__(self, slots: SlotTable, timing: Timing) -> None:
        self.slots = slots
        self.timing = timing
        self.w = w = slots.w
        self.adaptive = timing.adaptive
        #: the congestion window (uses in flight), its slow-start threshold, the last cut
        self.cwnd = float(min(timing.initial_window, w) if timing.adaptive else w)
        self.ssthresh = float(w)
        self.last_cut = -math.inf
        #: fast retransmit: results that must pass an unanswered transmission (0: off); the
        #: oldest unanswered transmission's sequence number and the results past it so far
        self.fr = timing.fast_retransmit
        self.gap_seq = -1
        self.gap = 0
        #: round trips: the least, SRTT (None before a sample), RTTVAR, and the RTO they give
        self.min_rtt = math.inf
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.base_rto = timing.rto_initial
        #: retransmissions found spurious (answered sooner after it than any round trip)
        self.spurious = 0
        #: held timers (see the module): no due timer fires before `gate` unless before
        #: `free_until` (after a real loss was seen; always, without hold_timers or without
        #: fast retransmit, which finds the losses among flowing results); the probe not yet
        #: answered by its result (a slot, -1: none)
        self.gate = -math.inf
        self.free_until = -math.inf if timing.hold_timers and self.fr else math.inf
        self.probe = -1

    def start(self, now: float) -> None:
        """The call starts at `now`: the first probe may go an RTO after it."""
        self.gate = now + self.base_rto

    def next_timer(self) -> float:
        """When a timer may fire next: the least timer, held until the gate (see the module;
        a lower bound, as the slot table's `tmin`)."""
        tmin = self.slots.tmin
        if tmin < self.free_until:
            return tmin
        return tmin if tmin > self.gate else self.gate

    def status(self, i: int, round_: int) -> None:
        """A STATUS for slot i's use of round `round_`: the switch holds this worker's copy,
        so if that use is in flight its answer will not show a loss (until it is sent
        again)."""
        slots = self.slots
        if 0 <= i < self.w and slots.block[i] != IDLE and slots.round[i] == round_:
            slots.held[i] = True

    def answered(self, i: int, rtt: float, now: float) -> int:
        """Slot i's use was answered, `rtt` after its first transmission (the slot table has
        accepted it: the slot is idle).  Takes the RTT sample, checks for a gap and grows
        the window; returns a slot to send again at once (fast retransmit: the window grows
        when the caller calls `grow()` after sending it), or -1."""
        slots = self.slots
        if slots.attempts[i] == 0:
            # RFC 6298: SRTT/RTTVAR with alpha 1/8, beta 1/4; RTO = SRTT + 4 RTTVAR, clamped;
            # the gains divided by the uses in flight (RFC 7323, appendix G): every result is
            # a sample, a window's worth per round trip, and with the per-segment gains the
            # estimate forgot the RTT's spread within a few milliseconds, so a peer's usual
            # skew of 10 ms fired timers at an RTO of about 6 (7 % of packets retransmitted
            # at 0 % loss, two fifths of them answered by the switch's STATUS: it had this
            # worker's copy; benchmarks/spurious.py).  The uses in flight: this one too.
            srtt = self.srtt
            if srtt is None:
                srtt, self.rttvar = rtt, rtt / 2
            else:
                n = slots.in_flight + 1
                self.rttvar += (abs(srtt - rtt) - self.rttvar) / (4 * n)
                srtt += (rtt - srtt) / (8 * n)
            self.srtt = srtt
            t = self.timing
            self.base_rto = min(max(srtt + 4 * self.rttvar, t.rto_min), t.rto_max)
            if rtt < self.min_rtt:
                self.min_rtt = rtt
        elif now - slots.tx_at[i] < self.min_rtt:
            # Answered sooner after the last retransmission than any round trip: the switch
            # had an earlier transmission, so that retransmission was spurious (Eifel's test,
            # RFC 3522, made by time).  Counted only: an RTO floor raised to such a use's wait
            # was tried and slowed recovery from real loss (docs/performance.md, section 6).
            self.spurious += 1
        if slots.attempts[i] and not slots.held[i] and now - slots.tx_at[i] >= (
                self.min_rtt if self.min_rtt < math.inf else 0.0):
            # A copy sent again answered by itself (not sooner than a round trip after it)
            # and no STATUS said the switch held it: the first copy was lost, and so may be
            # the other due uses': they go as without the gate for an RTO.  A probe's loss
            # cuts the window here (a gap's cut it when it was found).
            self.free_until = now + self.base_rto
            if i == self.probe and self.adaptive:
                self._loss_signal(now)
        if i == self.probe:
            self.probe = -1
        self.gate = now + self.base_rto       # results flow: the gate restarts
        if self.fr:
            j = self._gap_check(slots.seq[i], now - slots.tx_at[i], now)
            if j >= 0:
                return j        # the caller sends it, then calls grow()
        if self.adaptive:       # grow(), written out (once per result)
            cwnd = self.cwnd
            cwnd += 1.0 if cwnd < self.ssthresh else 1.0 / cwnd
            self.cwnd = cwnd if cwnd < self.w else float(self.w)
        return -1

    def grow(self) -> None:
        """The window's growth for a result (answered() makes it unless it returned a slot to
        send again: then it comes after that retransmission, as before the slot table)."""
        if self.adaptive:
            cwnd = self.cwnd
            cwnd += 1.0 if cwnd < self.ssthresh else 1.0 / cwnd
            self.cwnd = cwnd if cwnd < self.w else float(self.w)

    def expire(self, now: float) -> list[int]:
        """The uses whose timer is due, to send again now (at most cwnd of them when adaptive,
        oldest first), each timer re-armed with its RTO doubled up to rto_max; with held
        timers and no loss found, the probe alone (the caller calls this at next_timer())."""
        t = self.timing
        slots = self.slots
        timer = slots.timer
        due = slots.due(now)
        if len(due) and now >= self.free_until:
            p = self.probe
            if p >= 0 and not slots.held[p]:
                # The last probe is unanswered, not even by a STATUS: this worker's copy was
                # not at the switch.  A real loss: the due uses go (below), for an RTO.
                self.probe = -1
                self.free_until = now + self.base_rto
            else:
                # A probe: the longest due use alone (lowest slot among equal timers); the
                # next one no sooner than an RTO later while nothing is accepted.
                j = int(due[np.argmin(timer[due])])
                slots.rto[j] = min(slots.rto[j] * t.backoff, t.rto_max)
                timer[j] = now + slots.rto[j]
                self.probe = j
                self.gate = now + self.base_rto
                slots.retime()
                return [j]
        if len(due) and self.adaptive:
            self._loss_signal(now)
            allowed = max(1, int(self.cwnd))
            if len(due) > allowed:
                # Oldest first; the rest wait an RTO more without counting as an attempt, so
                # a cut window is not undone by a burst of retransmissions.
                due = due[np.argsort(timer[due], kind="stable")]
                timer[due[allowed:]] = now + self.base_rto
                due = due[:allowed]
        rto = slots.rto
        out: list[int] = due.tolist()
        for i in out:
            rto[i] = min(rto[i] * t.backoff, t.rto_max)
            timer[i] = now + rto[i]
        slots.retime()
        return out

    def _gap_check(self, seq: int, rtt: float, now: float) -> int:
        """An accepted result of transmission `seq`, `rtt` after it was sent: if the oldest
        unanswered transmission is older, one more result has passed it.  It is sent again
        once `fast_retransmit` results have passed it and it has waited longer than the
        passing one's round trip plus a quarter of the least round trip seen (RACK's
        reordering window, RFC 8985): uses sent in one burst come back in any order, and
        that alone must not look like a loss.  The count restarts when the oldest changes,
        which only delays the next detection; the timer still covers what this misses.
        Returns the slot to send again (its timer restarted), or -1."""
        slots = self.slots
        q, cur, seqs = slots.sent, slots.block, slots.seq
        assert q is not None       # kept whenever fast retransmit is on
        while q:
            e = q[0]
            s, j = e >> SLOT_BITS, e & SLOT_MASK
            if cur[j] != IDLE and seqs[j] == s:
                break
            q.popleft()
        else:
            return -1
        if s > seq:
            return -1
        if s != self.gap_seq:
            self.gap_seq, self.gap = s, 0
        self.gap += 1
        if self.gap < self.fr or now - slots.tx_at[j] < rtt + self.min_rtt / 4:
            return -1
        q.popleft()
        if self.adaptive:
            self._loss_signal(now)
        # Not a timeout: the slot's RTO keeps its value (no backoff), restarted from now.
        slots.arm(j, now + slots.rto[j])
        return j

    def _loss_signal(self, now: float) -> None:
        """A loss was found (timeout or gap): halve cwnd, at most once per smoothed RTT (the
        losses of one burst are all found within about an RTT), never below `window_min`.
        Random loss and a switch's overflowing socket buffer look alike to a worker (tried:
        a standing-queue test on the RTT misses the overflow, whose first samples are already
        queued), so every loss episode cuts, as in TCP; what keeps random loss cheap is the
        floor: with `window_min` (16) uses in flight, enough later results come back for fast
        retransmit to find the next loss, where a window of 2 left every loss to the timer."""
        if now - self.last_cut < (self.srtt or self.base_rto):
            return
        self.ssthresh = max(self.cwnd / 2, float(min(self.timing.window_min, self.w)))
        self.cwnd = self.ssthresh
        self.last_cut = now
