"""`netsum-ctl` verbs over a whole topology (`--topo`): setup, run (watch and restore), jobs,
per-job statistics and the drop simulator.  Each invocation adopts the state the switches hold,
so separate invocations see each other's work.
"""
from __future__ import annotations

import time
from typing import Any

from netsum.controller import ops, render
from netsum.controller import program as P
from netsum.controller.checks import check_setup, program_limits
from netsum.controller.errors import ControllerError, JobError
from netsum.controller.fabric import Controller, Program
from netsum.controller.jobs import place_job, plan_drop
from netsum.controller.leases import lease_of, reclaim_dead
from netsum.controller.session import Ctx, ctx_program, ctx_topology, open_controller, open_switch
from netsum.controller.topology import JobSpec, Topology
from netsum.controller.watchdog import Watchdog, reclaim, reclaimed_jobs
from netsum.p4rt.errors import LiteralError, PipelineMissing, SwitchUnreachable
from netsum.p4rt.schema import Schema, load_p4info

__all__ = ["cmd_setup", "cmd_run", "cmd_job_create", "cmd_job_list", "cmd_job_delete",
           "cmd_job_reset", "cmd_job_fail", "cmd_job_reap", "cmd_stats", "cmd_dropsim_set",
           "cmd_topo_show"]


# -- topology-wide: setup, jobs, stats, drop simulator ----------------------------------------

def _checked_setup(ctx: Ctx) -> tuple[Topology, Program | None, Schema]:
    """The --topo file and the program, refused (before any switch is contacted) unless the
    whole set-up fits the program: the pipeline push that starts a set-up empties every table
    and register, so a refusal after it would end the jobs running there (checks.py).  The
    program is None for `topo show --p4info FILE`: the P4Info alone says what fits."""
    topo = ctx_topology(ctx)    # a bad file is reported before the program is built
    if topo is None:
        raise ControllerError(f"`{ctx.args.command}` needs a topology file: --topo FILE")
    a = ctx.args
    program = None
    if a.command == "topo show" and (a.p4info or ctx.build is None):
        if not a.p4info:
            raise ControllerError("`topo show` checks the file against the program set-up "
                                  "would push: give --p4info P4INFO")
        schema = Schema(load_p4info(a.p4info))
    else:
        program = ctx_program(ctx)
        schema = Schema(program.p4info)
    check_setup(topo, schema)
    return topo, program, schema


def cmd_setup(ctx: Ctx) -> int:
    _, program, _ = _checked_setup(ctx)
    with open_controller(ctx, program, adopt=False) as ctl:
        ctl.push_pipeline()
        ctl.install_forwarding()
        _create_jobs(ctl)
        rows = _job_rows(ctl)
    ctx.emit(rows, f"pipeline, forwarding and {len(ctl.topo.jobs)} job(s) installed on "
             f"{len(ctl.topo.switches)} switch(es)\n" + render.table(rows))
    return 0


def _create_jobs(ctl: Controller) -> None:
    """The file's jobs in order; a refusal says which job stopped the set-up and what stands
    (each job is all-or-nothing, so the ones before it are complete)."""
    for spec in ctl.topo.jobs:
        try:
            ctl.create_job(spec)
        except ControllerError as exc:
            done = ", ".join(str(j) for j in sorted(ctl.jobs)) or "none"
            raise ControllerError(f"{exc.message} (set-up stopped at job {spec.id}; "
                                  f"installed jobs: {done})") from None


def _job_rows(ctl: Controller) -> list[dict[str, Any]]:
    return [{"job": j.spec.id, "switch": p.switch, "role": p.role.value, "slots": str(p.slots),
             "contributors": len([e for e in p.entries if e.table == P.MEMBER]),
             "mgid": p.group.mgid} for j in sorted(ctl.jobs.values(), key=lambda j: j.spec.id)
            for p in j.plans]


def cmd_job_create(ctx: Ctx) -> int:
    a = ctx.args
    with open_controller(ctx) as ctl:
        spec = next((j for j in ctl.topo.jobs if j.id == a.job_id), None)
        workers = tuple(a.workers.split(",")) if a.workers else (spec.workers if spec else ())
        slots = a.slots if a.slots is not None else (spec.slots if spec else None)
        if not workers or slots is None:
            raise JobError(f"job {a.job_id} is not in {ctl.topo.source}: give --workers "
                           "h1,h2,... and --slots N")
        for w in workers:
            ctl.topo.host(w)
        job = ctl.create_job(JobSpec(a.job_id, workers, slots))
        rows = [r for r in _job_rows(ctl) if r["job"] == job.spec.id]
    ctx.emit(rows, f"job {a.job_id} created\n" + render.table(rows))
    return 0


def cmd_job_list(ctx: Ctx) -> int:
    with open_controller(ctx) as ctl:
        rows = _job_rows(ctl)
        now = time.time()
        for r in rows:
            lease = lease_of(ctl.jobs[r["job"]])
            r["lease"] = "" if lease is None else (
                f"run {lease.run}, pid {lease.owner.pid} on {lease.owner.host}, "
                + (f"expires in {lease.expires - now:.0f} s" if lease.expires >= now else
                   f"expired {now - lease.expires:.0f} s ago"))
        free = [{"switch": n, "free_slots": al.free, "pool": al.size}
                for n, al in ctl.allocators.items()]
        gone = reclaimed_jobs(ctl)
    text = render.table(rows) + "\n\n" + render.table(free)
    if gone:
        text += "\n\nreclaimed (slots freed; the record stays until the job id is created " \
                "again)\n" + render.table(gone)
    ctx.emit({"jobs": rows, "slots": free, "reclaimed": gone}, text)
    return 0


def cmd_job_delete(ctx: Ctx) -> int:
    with open_controller(ctx) as ctl:
        ctl.delete_job(ctx.args.job_id)
    ctx.emit({"deleted": ctx.args.job_id}, f"job {ctx.args.job_id} deleted")
    return 0


def cmd_job_fail(ctx: Ctx) -> int:
    """A launcher (or a worker) reports a job's failure: reclaim it now rather than after the
    watchdog's timeout."""
    a = ctx.args
    why = "reported failed" + (f" (rank {a.rank})" if a.rank is not None else "")
    with open_controller(ctx) as ctl:
        r = reclaim(ctl, a.job_id, why)
    ctx.emit({"reclaimed": r.job_id, "slots": dict(r.slots), "why": r.why,
              "missing": r.missing}, r.line())
    return 0


def cmd_job_reap(ctx: Ctx) -> int:
    """Reclaim every leased job whose lease is dead (controller/leases.py): expired, or its
    owner gone from this machine.  Jobs without a lease are not touched."""
    with open_controller(ctx) as ctl:
        done = reclaim_dead(ctl)
    ctx.emit([{"reclaimed": r.job_id, "slots": dict(r.slots), "why": r.why} for r in done],
             "\n".join(r.line() for r in done) or "no job with a dead lease")
    return 0


def cmd_job_reset(ctx: Ctx) -> int:
    with open_controller(ctx) as ctl:
        ctl.reset_job(ctx.args.job_id)
    ctx.emit({"reset": ctx.args.job_id}, f"job {ctx.args.job_id} reset (entries re-asserted, "
             "counters zeroed)")
    return 0


_STAT_COLS = ["job", "switch", "role", "slots"] + [c for c, _ in P.JOB_COUNTERS]
#: Counters whose rates `stats --watch` shows (all of them get one in --json).
_RATE_COLS = ("data_in", "results_out", "retx")


def cmd_stats(ctx: Ctx) -> int:
    a = ctx.args
    with open_controller(ctx) as ctl:
        n = 0
        previous: list[dict[str, Any]] | None = None
        last = 0.0
        while True:
            stamp = time.strftime("%H:%M:%S")
            try:
                now = time.monotonic()
                rows = ctl.port_stats() if a.ports else ctl.job_stats()
            except (SwitchUnreachable, PipelineMissing) as exc:
                if not a.watch:
                    raise
                # Watching goes on through a switch restart; counters restart from zero.
                ctx.out.write(f"{stamp} {exc.message}\n")
                ctx.out.flush()
                n += 1
                if a.count and n >= a.count:
                    return 1
                time.sleep(a.watch)
                ctl.check(probe_timeout=min(1.0, a.watch))
                continue
            if a.watch and not a.json and ctx.out.isatty():
                ctx.out.write("\x1b[H\x1b[2J")
            title = "drop simulator per port" if a.ports else "per-job counters"
            cols = None if a.ports else _STAT_COLS
            if a.watch:
                keys, counters = (
                    (["switch", "port"], [c for c, _ in P.PORT_COUNTERS]) if a.ports
                    else (["job", "switch"], [c for c, _ in P.JOB_COUNTERS]))
                raw = rows
                rows = render.with_rates(rows, previous, now - last, keys, counters)
                previous, last = raw, now
                if not a.ports:
                    cols = [*_STAT_COLS, *(f"{c}/s" for c in _RATE_COLS)]
            ctx.emit(rows, f"{title} at {stamp}" + (" (rates per second since the last "
                     "sample)" if a.watch else "") + "\n" + render.table(rows, cols))
            ctx.out.flush()
            n += 1
            if not a.watch or (a.count and n >= a.count):
                return 0
            time.sleep(a.watch)


def cmd_dropsim_set(ctx: Ctx) -> int:
    a = ctx.args
    if not 0.0 <= a.probability <= 1.0:
        raise LiteralError(f"drop probability {a.probability} is not within 0..1")
    if a.topo:
        with open_controller(ctx) as ctl:
            name = a.switch or (ctl.topo.switches[0].name if len(ctl.topo.switches) == 1
                                else None)
            if name is None:
                raise ControllerError("say which switch with --switch")
            ctl.set_drop(name, a.port, a.probability, a.direction)
    else:
        with open_switch(ctx) as (client, schema):
            for e in plan_drop(schema, a.port, a.probability, a.direction):
                current = [x for x in ops.read_entries(client, schema, e.table)
                           if x.identity() == e.identity()]
                ops.write_batch(client, schema, ops.MODIFY if current else ops.INSERT, [e])
    thr = P.drop_threshold(a.probability)
    ctx.emit({"port": a.port, "probability": a.probability, "threshold": thr,
              "direction": a.direction},
             f"port {a.port} ({a.direction}): drop probability {a.probability:g} "
             f"(threshold {thr}/65536)")
    return 0


def cmd_run(ctx: Ctx) -> int:
    """Set everything up (or, with --attach, adopt what the switches hold: a restarted
    controller must not push a pipeline, which would clear the registers of running jobs),
    then watch the switches and restore any that restart."""
    a = ctx.args
    program: Program | None
    if a.attach:
        ctx_topology(ctx)   # a bad file is reported before the program is built
        program = ctx_program(ctx)
    else:
        _, program, _ = _checked_setup(ctx)
    with open_controller(ctx, program, adopt=a.attach) as ctl:
        if not a.attach:
            ctl.push_pipeline()
            ctl.install_forwarding()
            _create_jobs(ctl)
        ctx.out.write(f"controller running: {len(ctl.topo.switches)} switch(es), "
                      f"{len(ctl.jobs)} job(s){' adopted' if a.attach else ''}; checking "
                      f"every {a.interval:g} s\n")
        ctx.out.flush()

        def report(name: str, why: str) -> None:
            ctx.out.write(f"restored {name} ({why})\n")
            ctx.out.flush()

        dog = Watchdog(ctl, a.stuck_after) if a.stuck_after > 0 else None
        try:
            while True:
                time.sleep(a.interval)
                ctl.check(report)
                if dog is not None:
                    _watch(ctx, dog)
        except KeyboardInterrupt:
            return 0


def _watch(ctx: Ctx, dog: Watchdog) -> None:
    """One look at the jobs' counters; reclaims are logged.  A switch that is away or being
    restored is skipped (check() deals with it); the next interval looks again."""
    try:
        done = dog.poll()
    except (SwitchUnreachable, PipelineMissing):
        return
    except ControllerError as exc:
        ctx.out.write(f"watchdog: {exc.message} (will look again)\n")
        ctx.out.flush()
        return
    for r in done:
        ctx.out.write(r.line() + "\n")
        ctx.out.flush()


def cmd_topo_show(ctx: Ctx) -> int:
    """Validate the topology file as set-up does (against the program: --p4info, or the
    netsum build for --k) and show what the controller would install where; no switch is
    contacted."""
    topo, _, schema = _checked_setup(ctx)
    limits = program_limits(schema)
    switches = [{"switch": s.name, "grpc_addr": s.grpc_addr, "device_id": s.device_id,
                 "role": s.role.value, "parent": s.parent or "", "ports": len(s.ports),
                 "slots": s.slots, "hosts": len(topo.hosts_on(s.name))} for s in topo.switches]
    jobs = []
    for spec in topo.jobs:
        for name, place in place_job(topo, spec).items():
            jobs.append({"job": spec.id, "switch": name, "role": place.role.value,
                         "slots": spec.slots,
                         "contributors": " ".join(c.name for c in place.contributors)})
    ctx.emit({"switches": switches, "jobs": jobs, "program": limits},
             f"{topo.source}: {len(topo.switches)} switch(es), {len(topo.hosts)} host(s), "
             f"{len(topo.links)} link(s), {len(topo.jobs)} job(s); fits the program (per "
             f"switch: job ids 1..{limits['max_job_id']}, {limits['slot_pool']} slots, "
             f"{limits['job_table']} jobs, {limits['member_table']} members)\n\n" +
             render.table(switches) + "\n\n" + render.table(jobs))
    return 0
