"""What the worker core (workers/core.py) takes from the switch: a RESULT for the slot use in
flight (whole, or an ACK for a reduce-scatter chunk this rank does not own), a STATUS (never a
result: who is missing, and the job's last refusal), a REJECT (this worker's DATA disagrees
with the job or the round: fails the call at once, naming the mismatch), and why anything else
is not taken.

A base class of `WorkerCore`, which owns the state named below (its constructor sets all of
it up), `_accept` (a matched result) and `_fire` (the state machine).  What a slot has in
flight, and what it last accepted, is asked of the slot table (workers/slots.py).
"""
from __future__ import annotations

from netsum.wire import DEST_ALL, Flags, MsgType
from netsum.workers import wire
from netsum.workers.coretypes import (CoreState, DuplicateResult, Event, JobConfig, Rejected,
                                      StaleResult, Trigger, rejection)
from netsum.workers.refusals import applies, rejected_error
from netsum.workers.slots import IDLE, SlotTable
from netsum.workers.status import StatusBook

__all__ = ["ResultAcceptance"]

_RESULT = int(MsgType.RESULT)
_STATUS = int(MsgType.STATUS)
_REJECT = int(MsgType.REJECT)
_ACK = int(Flags.ACK)
_KNOWN = int(Flags.RETX | Flags.NONFINITE | Flags.ACK)
# A RESULT with values: any flag but ACK and the unknown bits.
_NOT_WHOLE = ~int(Flags.RETX | Flags.NONFINITE)
# The fields receive reads, in this order, with one struct call.
_READ = wire.field_reader(("msg_type", "flags", "job_id", "slot", "exp", "round", "offset"))


class ResultAcceptance:
    """Matching received packets against the slot uses in flight."""

    _job: JobConfig
    _job_id: int
    _k: int
    _w: int
    _length: int
    _rank: int | None
    _slots: SlotTable
    _dests: list[int]
    _mine: list[bool]
    _state: CoreState
    _ev: list[Event] | None
    _dups: int
    _stale: int
    _rejected: int
    _last_reject: str
    _acks_owned: int
    _status_at: float
    status_frames: int
    status: StatusBook

    def _accept(self, i: int, block: int, round_: int, exp: int, flags: int,
                view: memoryview | None, now: float, out: list[int]) -> None:
        raise NotImplementedError

    def _fire(self, trigger: Trigger) -> None:
        raise NotImplementedError

    def _qexp_of(self, block: int) -> int:
        raise NotImplementedError

    def _take(self, view: memoryview, now: float, out: list[int]) -> None:
        """One payload of a header and K values: a RESULT to accept, a STATUS to note, or
        counted as not ours."""
        msg_type, flags, job_id, i, exp, round_, offset = _READ(view)
        if msg_type != _RESULT or job_id != self._job_id or flags & _NOT_WHOLE:
            if msg_type == _STATUS and job_id == self._job_id and not flags & ~_KNOWN:
                self.status_frames += 1
                self._status_at = now
                self.on_status(view)
            else:
                self._reject(bytes(view))
            return
        self._match(i, round_, offset, exp, flags, view, now, out)

    def _take_bare(self, view: memoryview, now: float, out: list[int]) -> None:
        """One payload of the header alone: an ACK (a RESULT whose values went to the chunk's
        owner) or a REJECT of this job; anything else is counted as not ours."""
        msg_type, flags, job_id, i, exp, round_, offset = _READ(view)
        if job_id != self._job_id or flags & ~_KNOWN:
            self._reject(bytes(view))
        elif msg_type == _REJECT:
            self._refused(view)
        elif msg_type == _RESULT and flags & _ACK:
            self._match(i, round_, offset, exp, flags, None, now, out)
        else:
            self._reject(bytes(view))

    def _match(self, i: int, round_: int, offset: int, exp: int, flags: int,
               view: memoryview | None, now: float, out: list[int]) -> None:
        """A RESULT of this job for slot i (its values in `view`, or None for an ACK): the use
        in flight, a duplicate of the last accepted one, or stale."""
        if i < self._w:
            slots = self._slots
            block = slots.current(i, round_, offset)
            if block != IDLE:
                if view is None and (block < 0 or self._mine[block]):
                    # The values of this use are this rank's to keep (a bootstrap's zeros go
                    # to every rank): an ACK is not its result.  The switch would have to
                    # think this worker is another rank.
                    self._acks_owned += 1
                    self._reject(f"an ACK for slot {i} round {round_}, whose values this "
                                 f"rank{'' if self._rank is None else ' ' + str(self._rank)} "
                                 "owns: is the controller's rank for this worker its rank?")
                    return
                self._accept(i, block, round_, exp, flags, view, now, out)
                return
            if slots.duplicate(i, round_, offset):
                self._dups += 1
                if self._ev is not None:
                    self._ev.append(DuplicateResult(i, round_, offset))
                return
        self._stale += 1
        if self._ev is not None:
            self._ev.append(StaleResult(i, round_, offset))

    def on_status(self, payload: memoryview) -> None:
        """A STATUS frame of this job (msg_type 3: the switch's report on a slot that is not
        complete, to a member that sent DATA into it again; lane 0 of its values is the slot's
        member bitmap, `count` the contributions so far, `reason`/`length` the job's last
        refusal).  Never a result and never an error: counted in `status_frames`, and
        otherwise left to this hook (a subclass or the bookkeeping of who is missing).
        `payload` is a view of a receive buffer reused after the call: copy what must be
        kept.  By default it goes to `status`, which the deadline error asks."""
        self.status.note(payload, self._status_at)

    def _reject(self, payload: object) -> None:
        """The slow path: say precisely what is wrong with a packet that is not ours (or, a
        string, why a packet of ours is not taken)."""
        self._rejected += 1
        self._last_reject = reason = payload if isinstance(payload, str) else \
            rejection(payload, self._job_id, self._k)
        if self._ev is not None:
            self._ev.append(Rejected(reason))

    def _refused(self, view: memoryview) -> None:
        """A REJECT of this job: the switch refused this worker's DATA.  Fails the call at once
        with the mismatch in words (workers/refusals.py); after the call (state DONE) it is
        only counted (no use of this call can be refused any more)."""
        fields = wire.unpack_fields(view)
        if self._state is not CoreState.RUNNING:
            self._reject(f"a REJECT (reason {fields['reason']}) after the call completed")
            return
        slot = fields["slot"]
        use: dict[str, int] | None = None
        flying = self._slots.use(slot)
        if flying is not None:
            block, round_, offset = flying
            use = {"round": round_, "offset": offset,
                   "dest": self._dests[block] if block >= 0 else DEST_ALL,
                   "qexp": self._qexp_of(block)}
        job = self._job
        if not applies(fields, workers=job.num_workers, k=self._k, length=self._length,
                       window=self._w, use=use):
            # not about what this worker sends (a frame forged from its own port, or one of
            # another call): counted, and the call goes on
            self._reject(f"a REJECT (reason {fields['reason']}) this worker's own "
                         "configuration contradicts")
            return
        err = rejected_error(fields, job_id=self._job_id, rank=self._rank,
                             workers=job.num_workers, k=self._k, length=self._length,
                             sent=dict(use or {}, slot=self._w - 1))
        self._fire(Trigger.REJECTED)
        raise err
