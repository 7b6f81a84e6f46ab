"""Step time split into compute, exposed communication and overlap (torch-free, pure).

For one training step with per-bucket all-reduce intervals [submitted, finished]:

* `exposed` = time from the last bucket's hand-over (backward has nothing left to compute)
  to backward's return (DDP has waited for every bucket): communication nobody hid;
* `compute` = step wall time - exposed (forward, backward, optimizer, the hook's own work);
* `comm` = length of the union of the buckets' intervals: time the switch path was busy;
* `hidden` = comm - exposed: communication that ran while backward was still computing.

`hidden / comm` is the fraction of communication hidden behind backward.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["StepSplit", "split_step", "union_length"]


@dataclass(frozen=True, slots=True)
class StepSplit:
    wall: float
    compute: float
    exposed: float
    comm: float
    hidden: float

    @property
    def hidden_fraction(self) -> float:
        return self.hidden / self.comm if self.comm > 0 else 0.0


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def split_step(started: float, backward_returned: float, ended: float,
               buckets: Iterable[tuple[float, float]]) -> StepSplit:
    """`buckets`: (submitted, finished) per bucket of the step (monotonic seconds)."""
    spans = [(a, b) for a, b in buckets]
    wall = ended - started
    if not spans:
        return StepSplit(wall, wall, 0.0, 0.0, 0.0)
    last = max(a for a, _ in spans)
    exposed = max(0.0, backward_returned - last)
    comm = union_length(spans)
    return StepSplit(wall, wall - exposed, exposed, comm, max(0.0, comm - exposed))
