"""Reclaiming the slots of a job that cannot finish (a worker died mid-job), by the controller
itself: `netsum-ctl run` polls a `Watchdog`, `netsum-ctl job fail` reclaims on a report.

The rule (docs/reliability.md, "A worker killed"): a job is *stuck* on a switch when for
`stuck_after` seconds no RESULT of it went out there (`results_out` unchanged) while
retransmissions of it kept arriving (`retransmissions` grew since its last RESULT).  Sound
because of what the switch counts: a retransmission is a member's duplicate for the round a set
holds; a duplicate for a complete slot is answered with a RESULT (which `results_out` counts),
so duplicates without RESULTs are members asking for slots that lack someone's contribution.
A job idle between training steps sends nothing (no retransmissions) and a straggler that comes
back within `stuck_after` brings RESULTs back: neither is reclaimed.  Counters that go down (a
switch restarted, `job reset` zeroed them) restart the watch.  The one false alarm left is a
link that loses every RESULT for `stuck_after` seconds (the drop simulator at ~100 %).

Reclaiming = one transaction per job (Controller.delete_job with a record): its job, member,
replica and result_port entries and its multicast group go, its epoch moves on (late packets of
it are stale), its slot ranges are free again, and the epoch entry, which outlives the job,
carries the record (why, when, who was missing) as P4Runtime metadata: `job list` shows it,
also to other controller processes, until the job id is created again.  Who was missing comes
from the job's slot registers (bitmap, owner, done) over P4Runtime where the switch serves
register reads (netsum-switch; simple_switch_grpc answers UNIMPLEMENTED, and the record then
says so).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from netsum.controller import program as P
from netsum.controller.errors import ControllerError
from netsum.controller.fabric import Controller, Job
from netsum.match import Exact
from netsum.p4rt.cells import register_wildcard
from netsum.p4rt.entities import TableEntry

__all__ = ["Reclaim", "Watchdog", "missing_members", "reclaim", "reclaimed_jobs"]

RECORD_PREFIX = b"reclaimed "
_REGISTERS = ("NetsumIngress.bitmap", "NetsumIngress.owner", "NetsumIngress.done")


@dataclass(frozen=True, slots=True)
class Reclaim:
    job_id: int
    slots: tuple[tuple[str, str], ...]     # (switch, freed range)
    why: str
    missing: str

    def line(self) -> str:
        freed = ", ".join(f"{r} on {sw}" for sw, r in self.slots)
        return f"reclaimed job {self.job_id}: {self.why}; {self.missing}; freed slots {freed}"


@dataclass(slots=True)
class _Watch:
    results: int
    retx: int
    retx_at_result: int      # retransmissions when results_out last changed
    since: float             # when results_out last changed (or the watch started)


class Watchdog:
    """Call `poll()` periodically (every `netsum-ctl run --interval`): it reads every job's
    counters and reclaims the jobs that are stuck by the rule above."""

    def __init__(self, ctl: Controller, stuck_after: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < stuck_after < float("inf"):      # NaN fails this too
            raise ControllerError(f"stuck timeout {stuck_after:g} s: must be > 0 and finite")
        self.ctl = ctl
        self.stuck_after = stuck_after
        self.clock = clock
        self._watch: dict[tuple[int, str], _Watch] = {}

    def stuck(self) -> dict[int, str]:
        """Job id -> why it is stuck, from one read of the counters."""
        now = self.clock()
        out: dict[int, str] = {}
        seen = set()
        for row in self.ctl.job_stats():
            job, switch = int(str(row["job"])), str(row["switch"])
            res, retx = int(str(row["results_out"])), int(str(row["retx"]))
            key = (job, switch)
            seen.add(key)
            w = self._watch.get(key)
            if w is None or res < w.results or retx < w.retx:
                self._watch[key] = _Watch(res, retx, retx, now)
                continue
            if res != w.results:
                w.results, w.retx_at_result, w.since = res, retx, now
            w.retx = retx
            if retx > w.retx_at_result and now - w.since >= self.stuck_after:
                out.setdefault(job, f"no RESULT on {switch} for {now - w.since:.1f} s while "
                               f"{retx - w.retx_at_result} retransmissions arrived")
        for key in set(self._watch) - seen:
            del self._watch[key]
        return out

    def poll(self) -> list[Reclaim]:
        done = [reclaim(self.ctl, job, why) for job, why in sorted(self.stuck().items())]
        for r in done:
            for key in [k for k in self._watch if k[0] == r.job_id]:
                del self._watch[key]
        return done


def reclaim(ctl: Controller, job_id: int, why: str) -> Reclaim:
    """Name who is missing (before the epoch moves on), then delete the job with a record."""
    job = ctl.jobs.get(job_id)
    if job is None:
        known = ", ".join(str(j) for j in sorted(ctl.jobs)) or "none"
        raise ControllerError(f"no job {job_id} to reclaim (jobs: {known})")
    missing = missing_members(ctl, job)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = RECORD_PREFIX + f"{stamp}: {why}; {missing}".encode()[:400]
    ctl.delete_job(job_id, record=record)
    return Reclaim(job_id, tuple((p.switch, str(p.slots)) for p in job.plans), why, missing)


def _epoch(ctl: Controller, switch: str, job_id: int) -> int:
    for e in ctl.ledgers[switch].entries.values():
        if e.table == P.EPOCH and isinstance(e.match[0][1], Exact) and \
                e.match[0][1].value == job_id:
            return e.params[0]
    return 0


def missing_members(ctl: Controller, job: Job) -> str:
    """Which contributors the job's incomplete sets lack, from the slot registers: sets owned
    by the job's current epoch, not done; bit i = the job's i-th contributor on that switch
    (rank i: the i-th of the job's workers when they all sit on one switch)."""
    parts = []
    for plan in job.plans:
        schema = ctl.schema(plan.switch)
        try:
            infos = [schema.registers.get(name) for name in _REGISTERS]
        except LookupError:
            parts.append(f"{plan.switch} runs a program without slot registers")
            continue
        cells = range(2 * plan.slots.base, 2 * plan.slots.end)
        reads = [register_wildcard(schema, info.name, i) for info in infos for i in cells]
        try:
            got = ctl.clients[plan.switch].read(reads)
        except ControllerError as exc:
            parts.append(f"{plan.switch} serves no register reads ({exc.message})")
            continue
        value: dict[tuple[int, int], int] = {}
        for ent in got:
            re = ent.register_entry
            value[(re.register_id, re.index.index)] = int.from_bytes(re.data.bitstring, "big")
        bitmap, owner, done = infos
        tag = (_epoch(ctl, plan.switch, job.spec.id) << 16) | job.spec.id
        members = [e for e in plan.entries if e.table == P.MEMBER]
        full = (1 << len(members)) - 1
        absent: dict[int, int] = {}
        incomplete = 0
        for i in cells:
            if value.get((owner.id, i)) != tag or value.get((done.id, i), 0):
                continue
            incomplete += 1
            lack = full & ~value.get((bitmap.id, i), 0)
            for b in range(len(members)):
                if lack >> b & 1:
                    absent[b] = absent.get(b, 0) + 1
        if not absent:
            parts.append(f"no incomplete set of job {job.spec.id} on {plan.switch}")
            continue
        names = _member_names(ctl, plan.switch, members)
        who = []
        for b, n in sorted(absent.items(), key=lambda x: (-x[1], x[0])):
            name = names.get(b, f"bit {b}")
            # On one switch bit i is the job's i-th worker, its rank; in a tree, its place in
            # the job's worker list (a leaf switch has none).
            rank = b if len(job.plans) == 1 else (
                job.spec.workers.index(name) if name in job.spec.workers else None)
            label = f"rank {rank} ({name})" if rank is not None else name
            who.append(f"{label} in {n}")
        parts.append(f"missing on {plan.switch}: {', '.join(who)} of {incomplete} incomplete "
                     "sets")
    return "; ".join(parts)


def _member_names(ctl: Controller, switch: str, members: list[TableEntry]) -> dict[int, str]:
    """Member bit -> the topology's name for the contributor behind that member entry (a host
    on that port with those addresses, or a leaf switch by its service address)."""
    out = {}
    for e in members:
        _, port, ipv4, mac = (m.value if isinstance(m, Exact) else -1 for _, m in e.match)
        bit = e.params[0].bit_length() - 1
        host = next((h.name for h in ctl.topo.hosts if h.switch == switch and h.port == port
                     and h.ipv4 == ipv4 and h.mac == mac), None)
        leaf = next((s.name for s in ctl.topo.switches if s.service.ipv4 == ipv4 and
                     s.service.mac == mac), None)
        out[bit] = host or leaf or f"member {bit}"
    return out


def reclaimed_jobs(ctl: Controller) -> list[dict[str, object]]:
    """Jobs reclaimed and not created again, from the epoch entries' records."""
    rows: list[dict[str, object]] = []
    for switch, led in ctl.ledgers.items():
        for e in led.entries.values():
            if e.table != P.EPOCH or not e.metadata.startswith(RECORD_PREFIX):
                continue
            m = e.match[0][1]
            job_id = m.value if isinstance(m, Exact) else -1
            if job_id in ctl.jobs:
                continue
            rows.append({"job": job_id, "switch": switch, "epoch": e.params[0],
                         "record": e.metadata[len(RECORD_PREFIX):].decode(errors="replace")})
    return sorted(rows, key=lambda r: (int(str(r["job"])), str(r["switch"])))
