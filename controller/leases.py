"""Leased jobs: a job that names its owner and an expiry, renewed while the owner lives, so the
jobs of a run that died are reclaimed and a new run never fails because of its leftovers.

A lease is the P4Runtime metadata of the job's `job` entry on every switch it touches (an
opaque cookie the switch keeps and reads back, PI and netsum-switch alike): LEASE_PREFIX +
JSON {"run", "owner": {"host", "boot", "pidns", "pid", "start"}, "expires", "ttl", "info"}.
It is written with the job itself (`create_leased`: one transaction, so no crash can leave the
job without its lease) and renewed by the owner (`Heartbeat`: every ttl/3, a short P4Runtime
session that rewrites the metadata with a later expiry).  Whoever creates jobs first reclaims
the dead ones (`reclaim_dead`): a leased job is dead when

1. **its lease expired**: `expires` is past (wall clock, so machines' clocks must agree within
   a fraction of the ttl); the owner's heartbeat has stopped, whatever machine it ran on;
2. **its owner is gone**: the owner ran on this machine (same boot id) in this pid namespace,
   and no process with its pid and start time exists -- a SIGKILLed run is reclaimed at once,
   without waiting for the expiry.  A reused pid has another start time, so it does not pass
   for the owner; another machine or container is never judged by this rule;
3. **a member's host is held** (`held`, given by the caller): the caller's run holds the
   address of one of the job's member hosts -- its ranks bound it before registering, which a
   live member would have prevented -- so the job lost a member for good, on whatever machine
   its owner runs (netsum.training.register passes the hosts its ranks bound).

Reclaiming is the controller's (watchdog.reclaim): entries and group deleted, epoch moved on
(late packets are stale), slots freed, a record kept for `netsum-ctl job list`.  Jobs without
a lease (the topology file's, `netsum-ctl job create`) are never touched by these rules.

    lease = Lease.new(run="a1b2", ttl=60.0, info={"hosts": ["h1", "h2"]})
    with Controller(topo) as ctl:
        ctl.connect(); ctl.adopt()
        reclaim_dead(ctl)                      # earlier runs that died
        jobs = create_leased(ctl, specs, lease)
    beat = Heartbeat(topo, jobs, lease).start()
    ...                                        # the run
    beat.stop(); release(topo, [j.spec.id for j in jobs], lease.run)

Renewal and registration sessions arbitrate with the topology's election id, which two live
sessions cannot share: a session waits for the other (SwitchClient.connect), so renewals and
registrations take turns instead of failing.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from netsum.controller import ops
from netsum.controller import program as P
from netsum.controller.errors import ControllerError
from netsum.controller.fabric import Controller, Job
from netsum.controller.topology import JobSpec, Topology
from netsum.controller.watchdog import Reclaim, reclaim
from netsum.p4rt.entities import TableEntry

__all__ = ["LEASE_PREFIX", "Owner", "Lease", "lease_of", "dead_jobs", "reclaim_dead",
           "create_leased", "renew", "release", "Heartbeat"]

LEASE_PREFIX = b"netsum-lease "
#: Leases shorter than this would need renewals faster than a loaded machine keeps up with.
MIN_TTL = 3.0


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None
    when there is no such process or it is a zombie (SIGKILLed, not yet reaped)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat[stat.rindex(")") + 2:].split()   # the command name may hold spaces and ')'
    return None if fields[0] == "Z" else int(fields[19])


def _pidns() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


@dataclass(frozen=True, slots=True)
class Owner:
    """A process, named so that another process can tell whether it still runs: machine
    (host name and boot id), pid namespace, pid and start time."""
    host: str
    boot: str
    pidns: int
    pid: int
    start: int

    @classmethod
    def this_process(cls) -> Owner:
        pid = os.getpid()
        return cls(socket.gethostname(), _read("/proc/sys/kernel/random/boot_id") or "",
                   _pidns(), pid, _start(pid) or 0)

    def gone(self) -> str | None:
        """Why this owner certainly no longer runs, or None (see `alive`)."""
        alive, why = self._look()
        return why if alive is False else None

    def alive(self) -> bool | None:
        """True: it runs; False: it certainly does not; None: this process cannot tell
        (another machine, another pid namespace, no /proc)."""
        return self._look()[0]

    def _look(self) -> tuple[bool | None, str]:
        here = Owner.this_process()
        if not self.boot or (self.host, self.boot, self.pidns) != (here.host, here.boot,
                                                                   here.pidns):
            return None, ""
        start = _start(self.pid)
        if start is None:
            return False, f"its owner, pid {self.pid} on {self.host}, has exited"
        if start != self.start:
            return False, f"its owner, pid {self.pid} on {self.host}, has exited (the pid " \
                "is reused)"
        return True, ""


@dataclass(frozen=True, slots=True)
class Lease:
    run: str                          # names the run; a job is released only by its run
    owner: Owner
    expires: float                    # unix time
    ttl: float
    info: Mapping[str, Any] = field(default_factory=dict)   # the user's (e.g. hosts), as JSON

    @classmethod
    def new(cls, run: str | None = None, ttl: float = 60.0, info: Mapping[str, Any] | None =
            None, clock: Callable[[], float] = time.time) -> Lease:
        if not MIN_TTL <= ttl <= 86400:
            raise ControllerError(f"lease ttl {ttl:g} s: give {MIN_TTL:g} to 86400 s")
        return cls(run or secrets.token_hex(4), Owner.this_process(), round(clock() + ttl, 3),
                   ttl, dict(info or {}))

    def renewed(self, clock: Callable[[], float] = time.time) -> Lease:
        # Milliseconds, as encoded: a lease read back from the switch equals the one written.
        return replace(self, expires=round(clock() + self.ttl, 3))

    def encode(self) -> bytes:
        o = self.owner
        doc = {"run": self.run, "expires": self.expires, "ttl": self.ttl,
               "owner": {"host": o.host, "boot": o.boot, "pidns": o.pidns, "pid": o.pid,
                         "start": o.start}, "info": dict(self.info)}
        return LEASE_PREFIX + json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, metadata: bytes) -> Lease | None:
        """The lease in an entry's metadata; None for anything else (no lease, another
        program's cookie, a malformed one: such a job is not judged by the lease rules)."""
        if not metadata.startswith(LEASE_PREFIX):
            return None
        try:
            d = json.loads(metadata[len(LEASE_PREFIX):])
            o = d["owner"]
            owner = Owner(str(o["host"]), str(o["boot"]), int(o["pidns"]), int(o["pid"]),
                          int(o["start"]))
            return cls(str(d["run"]), owner, float(d["expires"]), float(d["ttl"]),
                       dict(d.get("info") or {}))
        except (ValueError, KeyError, TypeError):
            return None

    def dead(self, now: float) -> str | None:
        """Why the lease no longer holds its job (module docstring), or None.  An owner seen
        running keeps its jobs even past the expiry (its renewals may be failing for a while:
        a switch away, a long session holding the election id); one seen gone loses them at
        once; elsewhere the expiry decides."""
        alive, why = self.owner._look()
        if alive is False:
            return f"run {self.run}: {why}"
        if alive is None and now > self.expires:
            return (f"the lease of run {self.run} expired {now - self.expires:.1f} s ago "
                    f"(owner pid {self.owner.pid} on {self.owner.host}, ttl {self.ttl:g} s)")
        return None


def lease_of(job: Job) -> Lease | None:
    """The job's lease: the latest of its `job` entries' (one per switch it touches)."""
    found = [Lease.decode(e.metadata) for p in job.plans for e in p.entries if e.table == P.JOB]
    leases = [x for x in found if x is not None]
    return max(leases, key=lambda x: x.expires) if leases else None


def dead_jobs(ctl: Controller, now: float | None = None,
              held: Iterable[str] = ()) -> dict[int, str]:
    """Leased jobs of the controller's (adopted) view that are dead, with why; `held`: hosts
    whose addresses the caller's run holds (rule 3)."""
    now = time.time() if now is None else now
    held = frozenset(held)
    out = {}
    for job_id, job in sorted(ctl.jobs.items()):
        lease = lease_of(job)
        if lease is None:
            continue
        taken = [h for h in job.spec.workers if h in held]
        why = (f"run {lease.run}: its member host {taken[0]} is now held by another run, so "
               "its own rank there is gone") if taken else lease.dead(now)
        if why is not None:
            out[job_id] = why
    return out


def reclaim_dead(ctl: Controller, now: float | None = None,
                 held: Iterable[str] = ()) -> list[Reclaim]:
    """Reclaim every dead leased job (after `ctl.adopt()`); what was reclaimed and why."""
    return [reclaim(ctl, job_id, why) for job_id, why in dead_jobs(ctl, now, held).items()]




def create_leased(ctl: Controller, specs: Iterable[JobSpec], lease: Lease) -> list[Job]:
    """Create the jobs, each `job` entry carrying the lease from its first write; all of them
    or none (the ones made are deleted again when one is refused)."""
    made: list[Job] = []
    try:
        for spec in specs:
            made.append(ctl.create_job(spec, metadata=lease.encode()))
    except ControllerError:
        for job in made:
            ctl.delete_job(job.spec.id)
        raise
    return made


def _job_entries(job: Job) -> list[tuple[str, TableEntry]]:
    return [(p.switch, e) for p in job.plans for e in p.entries if e.table == P.JOB]


def renew(ctl: Controller, jobs: Iterable[Job], lease: Lease) -> tuple[Lease, list[int]]:
    """Rewrite the jobs' leases with a later expiry, over `ctl`'s sessions (connected; no
    adopt needed).  Each `job` entry is read first and rewritten only while it still carries
    this run's lease -- a job reclaimed and created again under the same id by another run is
    not ours to touch.  Returns the renewed lease and the ids of jobs found lost."""
    new = lease.renewed()
    lost = []
    for job in jobs:
        for switch, entry in _job_entries(job):
            client, schema = ctl.clients[switch], ctl.schema(switch)
            key = entry.encode(schema)
            key.table_entry.ClearField("action")
            got = [TableEntry.decode(e, schema) for e in client.read([key])
                   if e.HasField("table_entry")]
            current = Lease.decode(got[0].metadata) if got else None
            if current is None or current.run != lease.run:
                lost.append(job.spec.id)
                break
            held = got[0]
            ops.write_batch(client, schema, ops.MODIFY, [replace(held,
                                                                 metadata=new.encode())])
    return new, lost


def release(topo: Topology, job_ids: Iterable[int], run: str, timeout: float = 30.0) -> list[int]:
    """Delete the jobs that still carry run `run`'s lease (a new run may have reclaimed one
    and reused its id); the ids deleted."""
    with Controller(topo, timeout=timeout) as ctl:
        ctl.connect()
        ctl.adopt()
        done = []
        for job_id in job_ids:
            job = ctl.jobs.get(job_id)
            lease = lease_of(job) if job is not None else None
            if lease is not None and lease.run == run:
                ctl.delete_job(job_id)
                done.append(job_id)
        return done


class Heartbeat:
    """Renews a run's leases from a background thread every ttl/3 (a renewal that fails is
    tried again a second later; the lease lapses only after the ttl without one).  `lost`
    names jobs found reclaimed; `error` the last renewal's failure, "" after a success."""

    def __init__(self, topo: Topology, jobs: Iterable[Job], lease: Lease,
                 timeout: float = 10.0) -> None:
        self.topo = topo
        self.jobs = list(jobs)
        self.lease = lease
        self.timeout = timeout
        self.lost: list[int] = []
        self.error = ""
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"netsum-lease-{lease.run}",
                                        daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.timeout + 5)

    def beat(self) -> None:
        """One renewal, now (what the thread does every ttl/3)."""
        live = [j for j in self.jobs if j.spec.id not in self.lost]
        if not live:
            return
        with Controller(self.topo, timeout=self.timeout) as ctl:
            ctl.connect()
            self.lease, lost = renew(ctl, live, self.lease)
        self.lost += lost
        self.renewals += 1

    def _loop(self) -> None:
        period = self.lease.ttl / 3
        wait = period
        while not self._stop.wait(wait):
            try:
                self.beat()
                self.error, wait = "", period
            except ControllerError as exc:
                self.error, wait = exc.message, min(1.0, period)
