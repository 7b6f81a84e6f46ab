"""Jobs of training runs that died, found and reclaimed when a new run registers (torch-free).

A training run's netsum jobs carry a lease: the P4Runtime metadata of their `job` table entry
(an opaque cookie the switch keeps and reads back; PI and netsum-switch alike) holds
LEASE_PREFIX + JSON {"run", "hosts", "owner": {"host", "pid", "start"}, "created"}, the owner
being the rank-0 process that registered it.  When a run registers, its rank 0 reclaims every
leased job that is certainly dead:

1. **its host is held**: one of the job's member hosts is held by a rank of the new run.  Every
   rank opens its transport -- binds its host's address: the UDP-tunnel port's one fixed peer,
   or the host's IPv4 and UDP port -- before rank 0 looks, and a live rank of the old run
   holds that address for its whole life (the new bind would have failed), so the old job
   lost a member for good;
2. **its owner is gone**: the job was registered on this machine by a process that no longer
   exists (pid and start time from /proc: a reused pid does not pass for it).  A training run
   ends with its rank 0, which deletes its jobs; leftovers whose rank 0 is gone are a crash's.

Reclaiming is the controller's (controller/watchdog.py `reclaim`): the job's entries and group
deleted, its epoch moved on (late packets are stale), its slots freed, and the record (why, who
was missing) kept for `netsum-ctl job list`.  Jobs without a lease -- the topology file's,
jobs made with netsum-ctl -- are never touched; neither is a leased job of a live run (on
other hosts, with a live owner).

This is the training side's rule, built on what the controller library offers today.  With
leases kept by the controller itself (expiry renewed by a heartbeat), `dead_jobs` becomes "the
controller's expired leases" and rule 2's /proc check goes (it cannot see other machines).
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import replace

from netsum.controller import ops
from netsum.controller import program as P
from netsum.controller.fabric import Controller, Job
from netsum.controller.watchdog import reclaim

__all__ = ["LEASE_PREFIX", "lease_record", "lease_of", "tag_jobs", "owner_gone", "dead_jobs",
           "reclaim_dead", "process_start"]

LEASE_PREFIX = b"netsum-training "


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None
    when there is no such process.  With the pid it names one process for the machine's
    uptime."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields count from the last ')'.
    fields = stat[stat.rindex(b")") + 2:].split()
    return fields[19].decode()


def lease_record(run: str, hosts: list[str]) -> bytes:
    pid = os.getpid()
    doc = {"run": run, "hosts": hosts, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                time.gmtime()),
           "owner": {"host": socket.gethostname(), "pid": pid, "start": process_start(pid)}}
    return LEASE_PREFIX + json.dumps(doc, separators=(",", ":")).encode()


def lease_of(job: Job) -> dict[str, object] | None:
    """The job's lease (from its `job` entry on any switch), or None: not a training run's."""
    for plan in job.plans:
        for e in plan.entries:
            if e.table == P.JOB and e.metadata.startswith(LEASE_PREFIX):
                try:
                    doc = json.loads(e.metadata[len(LEASE_PREFIX):])
                except ValueError:
                    return None
                return doc if isinstance(doc, dict) else None
    return None


def tag_jobs(ctl: Controller, job_ids: list[int], record: bytes) -> None:
    """Give the jobs' `job` entries the lease (a MODIFY of the metadata alone)."""
    for job_id in job_ids:
        for plan in ctl.jobs[job_id].plans:
            for e in plan.entries:
                if e.table != P.JOB:
                    continue
                new = replace(e, metadata=record)
                ops.write_batch(ctl.clients[plan.switch], ctl.schema(plan.switch), ops.MODIFY,
                                [new])
                ctl.ledgers[plan.switch].entries[new.identity()] = new


def owner_gone(lease: dict[str, object], hostname: str | None = None) -> bool:
    """Rule 2: the lease's owner ran on this machine and is no longer running."""
    owner = lease.get("owner")
    if not isinstance(owner, dict) or owner.get("host") != (hostname or socket.gethostname()):
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    start = process_start(pid)
    return start is None or (owner.get("start") is not None and start != owner.get("start"))


def dead_jobs(ctl: Controller, held: set[str]) -> dict[int, str]:
    """Leased jobs that are certainly dead (module docstring), with why; `held`: the hosts
    whose addresses the registering run's ranks hold."""
    out: dict[int, str] = {}
    for job_id, job in sorted(ctl.jobs.items()):
        lease = lease_of(job)
        if lease is None:
            continue
        taken = [h for h in job.spec.workers if h in held]
        owner = lease.get("owner")
        if taken:
            out[job_id] = (f"training run {lease.get('run')}'s job: its host {taken[0]} is now "
                           "held by a rank of a new run, so its own rank there is gone")
        elif owner_gone(lease) and isinstance(owner, dict):
            out[job_id] = (f"training run {lease.get('run')}'s job: its registering process "
                           f"{owner.get('pid')} on {owner.get('host')} is gone")
    return out


def reclaim_dead(ctl: Controller, held: set[str]) -> list[str]:
    """Reclaim `dead_jobs`; one line per job reclaimed."""
    return [reclaim(ctl, job_id, why).line() for job_id, why in dead_jobs(ctl, held).items()]
