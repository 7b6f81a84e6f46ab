"""After every run: what should never happen on a switch, checked and shown.

Owns the list of a switch's data-plane statistics that must stay 0 in a clean run (an internal
error is an exception on the packet path: a bug), reading them from the embedded switch
(`netsum.v1.SwitchConfig/GetStats` beside P4Runtime, with the first internal error's message),
and the verdict over them and a job's refusal counters (netsum.p4's per-job `drop_*`
counters, controller.program.REFUSALS): the rig never sends anything a member would not, over
links that keep each sender's order, so every refusal is a fault too.  Pure apart from the one
read; the rig calls it after each job and the demo prints it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from netsum.controller import program as P
from netsum.controller.errors import ControllerError
from netsum.controller.queues import get_stats
from netsum.p4rt.client import Endpoint

__all__ = ["SHOULD_BE_ZERO", "SwitchHealth", "read_switch", "job_refusals", "problems", "summary"]

#: Device statistics (netsum/switch/stats.py) that count faults, never ordinary traffic.
SHOULD_BE_ZERO: tuple[str, ...] = (
    "internal_errors", "udp_foreign", "register_oob", "counter_oob", "assert_failures",
    "loop_limit", "recirc_loops", "tx_errors", "shm_bad_desc", "shm_bad_index",
)


@dataclass(frozen=True, slots=True)
class SwitchHealth:
    """One switch after one job: its device statistics (None where the target does not
    serve them: real simple_switch_grpc), the first internal error, and the job's refusal
    counters there (empty for a job with no switch state).  `unreadable` says why statistics
    a switch should serve could not be read (itself a fault)."""
    switch: str
    stats: Mapping[str, int] | None
    first_error: str | None = None
    refusals: Mapping[str, int] = field(default_factory=dict)
    unreadable: str | None = None


def read_switch(name: str, endpoint: Endpoint, refusals: Mapping[str, int],
                timeout: float = 5.0) -> SwitchHealth:
    """The embedded switch at `endpoint` (it serves GetStats; failing to is a fault)."""
    try:
        reply = get_stats(endpoint, timeout)
    except ControllerError as exc:
        return SwitchHealth(name, None, None, dict(refusals), str(exc))
    stats = {k: int(v) for k, v in reply.get("stats", {}).items()}
    return SwitchHealth(name, stats, reply.get("first_error"), dict(refusals))


def job_refusals(rows: Sequence[Mapping[str, object]], job_id: int) -> dict[str, dict[str, int]]:
    """Per switch, the job's refusal counters from Controller.job_stats() rows."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        if row.get("job") == job_id:
            out[str(row["switch"])] = {c: int(row.get(c, 0) or 0)  # type: ignore[call-overload]
                                       for c in P.REFUSALS}
    return out


def problems(healths: Sequence[SwitchHealth]) -> list[str]:
    """One line per fault found, the first internal error's message included."""
    out = []
    for h in healths:
        if h.unreadable is not None:
            out.append(f"switch {h.switch}: cannot read its statistics: {h.unreadable}")
        if h.stats is not None:
            bad = {k: h.stats.get(k, 0) for k in SHOULD_BE_ZERO if h.stats.get(k, 0)}
            if bad.get("internal_errors"):
                out.append(f"switch {h.switch}: {bad.pop('internal_errors')} internal errors, "
                           f"the first: {h.first_error or '(message not kept)'}")
            if bad:
                out.append(f"switch {h.switch}: " + ", ".join(f"{k} {v}" for k, v in bad.items()))
        refused = {k: v for k, v in h.refusals.items() if v}
        if refused:
            out.append(f"switch {h.switch}: refused " +
                       ", ".join(f"{k} {v}" for k, v in refused.items()))
    return out


def summary(healths: Sequence[SwitchHealth]) -> str:
    """What the demo shows: per switch the checked statistics and refusal counters."""
    lines = []
    for h in healths:
        if h.unreadable is not None:
            stats = f"statistics unreadable ({h.unreadable})"
        elif h.stats is None:
            stats = "device statistics not served by this target"
        else:
            stats = ", ".join(f"{k} {h.stats.get(k, 0)}" for k in SHOULD_BE_ZERO)
        refusals = ", ".join(f"{k} {v}" for k, v in h.refusals.items()) or "no job state"
        lines.append(f"  switch {h.switch}: {stats}; refusals: {refusals}")
    return "\n".join(lines)
