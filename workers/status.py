"""What the switch's STATUS replies said about slots that wait in vain (docs/protocol.md,
"STATUS"): the latest member bitmap per slot, and the deadline error's sentence naming the
ranks missing from it, led by the job's last refusal when the switch reports one.

A STATUS is never a result: it answers this worker's own re-sent DATA for a (slot, round) the
switch has from it but that lacks other members' contributions.  Bit i of the bitmap is the
member with worker_bit 1 << i, i.e. the i-th worker of the job's worker list on that switch
(controller/jobs.py), which is rank i when ranks are numbered in that order (netsum.rig and the
tests do).  A v2 STATUS also carries the job's last refusal (`reason` and, in `length`, the
refused member's bit; 0 and 0 when none): a member the switch refused fails at once with its
own error, and the others name it here.  Pure bookkeeping: no I/O, no clock of its own.
"""
from __future__ import annotations

from collections.abc import Iterable

from netsum.wire import HEADER_BYTES
from netsum.workers import wire
from netsum.workers.refusals import describe_reason

__all__ = ["StatusBook"]

_SLOT_ROUND = wire.field_reader(("slot", "round"))
_REFUSAL = wire.field_reader(("reason", "length"))


class StatusBook:
    """Per slot the round and bitmap of the latest STATUS, and when the last one came."""

    __slots__ = ("_n", "_latest", "_at", "_last", "received", "refusal")

    def __init__(self, num_workers: int) -> None:
        self._n = num_workers
        self._latest: dict[int, tuple[int, int]] = {}     # slot -> (round, bitmap)
        self._at = -1.0
        self._last = 0                                       # the latest STATUS's bitmap
        #: STATUS replies taken (all slots, all rounds)
        self.received = 0
        #: the job's last refusal the switch reported: (reason, worker bit), or None
        self.refusal: tuple[int, int] | None = None

    def note(self, payload: memoryview | bytes, now: float) -> None:
        """A STATUS payload of the job (header + K values): its slot and round from the
        header, the bitmap from value[0]; `payload` may be a reused buffer (nothing of it is
        kept)."""
        slot, round_ = _SLOT_ROUND(payload)
        bitmap = int.from_bytes(payload[HEADER_BYTES:HEADER_BYTES + 4], "big")
        self._latest[slot] = (round_, bitmap)
        self._at = now
        self._last = bitmap
        self.received += 1
        reason, refused = _REFUSAL(payload)
        if reason:
            self.refusal = (reason, refused)

    def missing(self, waiting: Iterable[tuple[int, int]]) -> dict[int, int]:
        """rank -> how many of the `waiting` (slot, round) pairs have a STATUS of that very
        round whose bitmap lacks the rank."""
        out: dict[int, int] = {}
        full = (1 << self._n) - 1
        for slot, round_ in waiting:
            got = self._latest.get(slot)
            if got is None or got[0] != round_:
                continue
            absent = ~got[1] & full
            for rank in range(self._n):
                if absent >> rank & 1:
                    out[rank] = out.get(rank, 0) + 1
        return out

    def refused(self) -> str:
        """The job's last refusal as the switch reported it, in words ('' when none)."""
        if self.refusal is None:
            return ""
        reason, bit = self.refusal
        if bit == 0:
            return (f"the root switch refused this leaf's partial sums "
                    f"({describe_reason(reason)} - a member behind another leaf?)")
        ranks = [r for r in range(32) if bit >> r & 1]
        return (f"the switch refused rank {', '.join(map(str, ranks))}'s DATA "
                f"({describe_reason(reason)}; that rank failed with the details)")

    def explain(self, job_id: int, waiting: list[tuple[int, int]], now: float) -> str:
        """The deadline error's lead: the job's last refusal if the switch reported one, and
        which ranks the switch said are missing, or that it said nothing (no STATUS for any
        waiting slot: unreachable, or not configured for the job)."""
        lead = self._explain(job_id, waiting, now)
        refused = self.refused()
        return f"job {job_id}: {refused}; {lead}" if refused else f"job {job_id}: {lead}"

    def _explain(self, job_id: int, waiting: list[tuple[int, int]], now: float) -> str:
        counts = self.missing(waiting)
        known = sum(1 for s, r in waiting if self._latest.get(s, (None,))[0] == r)
        if not counts:
            if known:
                return (f"the switch's last STATUS for the {known} waiting slots "
                        "names no missing member (results lost on the way back?)")
            return (f"no STATUS from the switch for any of the {len(waiting)} "
                    "waiting slots (the switch unreachable, or not configured for this job?)")
        most = max(counts.values())
        lead = sorted(r for r, c in counts.items() if c == most)
        rest = sorted((r for r in counts if r not in lead), key=lambda r: (-counts[r], r))
        who = ", ".join(map(str, lead))
        text = (f"no contribution from rank{'s' if len(lead) > 1 else ''} {who} "
                f"(of {self._n}) for {most} slots")
        if rest:
            text += " (also missing: " + ", ".join(f"rank {r} in {counts[r]}"
                                                   for r in rest[:4]) + ")"
        return (text + f"; last STATUS bitmap {self._last:#0{self._n + 2}b} from the switch "
                f"{now - self._at:.1f} s ago")
