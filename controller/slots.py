"""Slot-range allocation on one switch: every job gets a contiguous, non-overlapping range.

A switch has a fixed pool of aggregation slots (its register arrays' size).  Jobs get
first-fit contiguous ranges; a request that does not fit is refused with what is free, e.g.
"job 7 needs 600 slots on s1 but only 424 are free (largest free range: 300 at 700..999)".
Pure bookkeeping: no I/O, so the controller can plan a job before touching any switch.
"""
from __future__ import annotations

from dataclasses import dataclass

from netsum.controller.errors import AllocationError

__all__ = ["SlotRange", "SlotAllocator"]


@dataclass(frozen=True, slots=True)
class SlotRange:
    base: int
    count: int

    @property
    def end(self) -> int:
        """One past the last slot."""
        return self.base + self.count

    def __str__(self) -> str:
        return f"{self.base}..{self.end - 1}"


class SlotAllocator:
    """Invariant: the ranges in `self.ranges` are pairwise disjoint and inside 0..size-1."""

    def __init__(self, size: int, owner: str = "switch") -> None:
        self.size = size
        self.owner = owner
        self.ranges: dict[int, SlotRange] = {}

    def free_ranges(self) -> list[SlotRange]:
        out, at = [], 0
        for r in sorted(self.ranges.values(), key=lambda r: r.base):
            if r.base > at:
                out.append(SlotRange(at, r.base - at))
            at = r.end
        if at < self.size:
            out.append(SlotRange(at, self.size - at))
        return out

    @property
    def free(self) -> int:
        return self.size - sum(r.count for r in self.ranges.values())

    def allocate(self, job_id: int, count: int) -> SlotRange:
        if job_id in self.ranges:
            raise AllocationError(f"job {job_id} already holds slots {self.ranges[job_id]} "
                                  f"on {self.owner}")
        if count < 1:
            raise AllocationError(f"job {job_id}: a job needs at least 1 slot, asked {count}")
        for gap in self.free_ranges():
            if gap.count >= count:
                got = SlotRange(gap.base, count)
                self.ranges[job_id] = got
                return got
        raise AllocationError(self._refusal(job_id, count))

    def reserve(self, job_id: int, want: SlotRange) -> SlotRange:
        """Take exactly `want` (restoring a known layout); refused if it overlaps."""
        if want.base < 0 or want.count < 1 or want.end > self.size:
            raise AllocationError(f"job {job_id}: slots {want} are outside {self.owner}'s "
                                  f"pool 0..{self.size - 1}")
        for other, r in self.ranges.items():
            if other != job_id and r.base < want.end and want.base < r.end:
                raise AllocationError(f"job {job_id}: slots {want} overlap job {other}'s "
                                      f"{r} on {self.owner}")
        self.ranges[job_id] = want
        return want

    def release(self, job_id: int) -> None:
        self.ranges.pop(job_id, None)

    def _refusal(self, job_id: int, count: int) -> str:
        gaps = self.free_ranges()
        if not gaps:
            return (f"job {job_id} needs {count} slots on {self.owner} but none are free "
                    f"(all {self.size} in use)")
        big = max(gaps, key=lambda g: g.count)
        return (f"job {job_id} needs {count} contiguous slots on {self.owner} but only "
                f"{self.free} of {self.size} are free (largest free range: {big.count} at {big})")
