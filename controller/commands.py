"""The verbs of `netsum-ctl`: each turns parsed arguments into controller-library calls and
prints the outcome.  Sessions are opened and always closed here; errors propagate as
`ControllerError` to the single edge in `cli.main`.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterator, TextIO

from controller import entities, ops, render, values
from controller import program as P
from controller.client import Endpoint, SwitchClient
from controller.entities import MulticastGroup, TableEntry
from controller.errors import ControllerError, JobError, LiteralError
from controller.fabric import Controller, Program, load_program
from controller.schema import Schema, load_p4info
from controller.topology import JobSpec, Topology, load_topology

__all__ = ["Ctx", "COMMANDS"]


@dataclass(frozen=True, slots=True)
class Ctx:
    args: argparse.Namespace
    out: TextIO

    def emit(self, data: Any, text: str) -> None:
        render.emit(self.out, self.args.json, data, text)


# -- sessions ---------------------------------------------------------------------------------

def _topology(ctx: Ctx) -> Topology | None:
    return load_topology(ctx.args.topo) if ctx.args.topo else None


def _endpoint(ctx: Ctx) -> Endpoint:
    a = ctx.args
    topo = _topology(ctx)
    if topo is not None and not a.grpc_addr_given:
        if a.switch:
            sw = topo.switch(a.switch)
        elif len(topo.switches) == 1:
            sw = topo.switches[0]
        else:
            raise ControllerError(f"{topo.source} has {len(topo.switches)} switches: say which "
                                  f"with --switch ({', '.join(s.name for s in topo.switches)})")
        return Endpoint(sw.grpc_addr, sw.device_id, sw.election_id)
    return Endpoint(a.grpc_addr, a.device_id, a.election_id)


@contextlib.contextmanager
def _session(ctx: Ctx) -> Iterator[tuple[SwitchClient, Schema]]:
    client = SwitchClient(_endpoint(ctx), ctx.args.timeout)
    client.connect()
    try:
        if ctx.args.p4info:
            schema = Schema(load_p4info(ctx.args.p4info))
        else:
            got = client.get_pipeline()
            if got is None:
                raise ControllerError(f"switch {client.endpoint} has no forwarding pipeline: "
                                      "push one first (`netsum-ctl pipeline push`)")
            schema = Schema(got[0])
        yield client, schema
    finally:
        client.close()


def _program(ctx: Ctx) -> Program:
    a = ctx.args
    if a.p4info and getattr(a, "bmv2_json", None):
        return load_program(a.p4info, a.bmv2_json)
    if a.p4info or getattr(a, "bmv2_json", None):
        raise ControllerError("give both --p4info P4INFO and the BMv2 JSON, or neither (then "
                              "the netsum program is built and used)")
    try:
        from netsum.build import BuildError, ensure_built
    except ImportError as exc:
        raise ControllerError(f"the netsum build is unavailable ({exc}); give --p4info and "
                              "a BMv2 JSON") from None
    try:
        json_path, info_path = ensure_built(k=a.k)
    except BuildError as exc:
        raise ControllerError(f"building p4/netsum.p4 failed: {exc}") from None
    return load_program(info_path, json_path)


@contextlib.contextmanager
def _controller(ctx: Ctx, program: Program | None = None,
                adopt: bool = True) -> Iterator[Controller]:
    topo = _topology(ctx)
    if topo is None:
        raise ControllerError(f"`{ctx.args.verb}` needs a topology file: --topo FILE")
    ctl = Controller(topo, program, ctx.args.timeout)
    try:
        ctl.connect()
        if adopt:
            ctl.adopt()
        yield ctl
    finally:
        ctl.close()


# -- formatting -------------------------------------------------------------------------------

def _entry_row(schema: Schema, e: TableEntry) -> dict[str, Any]:
    t = schema.table(e.table)
    widths = {f.name: f.bitwidth for f in t.key}
    match = {name: values.format_match(m, widths[name]) for name, m in e.match}
    row: dict[str, Any] = {"match": " ".join(f"{k}={v}" for k, v in match.items()) or "*"}
    if e.action:
        a = schema.action(e.action)
        row["action"] = a.alias
        row["params"] = " ".join(f"{p.name}={values.format_int(v, p.bitwidth)}"
                                 for p, v in zip(a.params, e.params))
    if t.needs_priority:
        row["priority"] = e.priority
    if e.counter is not None:
        row["packets"], row["bytes"] = e.counter
    if e.is_default:
        row["match"] = "(default)"
    return row


def _entry_json(schema: Schema, e: TableEntry) -> dict[str, Any]:
    t = schema.table(e.table)
    widths = {f.name: f.bitwidth for f in t.key}
    out: dict[str, Any] = {
        "table": e.table, "match": {n: values.format_match(m, widths[n]) for n, m in e.match},
        "action": e.action, "params": {}, "priority": e.priority, "is_default": e.is_default}
    if e.action:
        a = schema.action(e.action)
        out["params"] = {p.name: v for p, v in zip(a.params, e.params)}
    if e.counter is not None:
        out["packets"], out["bytes"] = e.counter
    return out


# -- table verbs ------------------------------------------------------------------------------

def _split_entry_words(words: list[str]) -> tuple[list[str], list[str]]:
    if "=>" in words:
        i = words.index("=>")
        return words[:i], words[i + 1:]
    return words, []


def _entry_from_words(schema: Schema, table: str, action: str | None,
                      words: list[str]) -> TableEntry:
    t = schema.table(table)
    keys, rest = _split_entry_words(words)
    prio = None
    if action is None:
        # table_delete T keys... [prio]
        if t.needs_priority and len(keys) == len(t.key) + 1:
            keys, prio = keys[:-1], keys[-1]
        return entities.parse_table_entry(schema, table, None, keys, [], prio)
    a = schema.table_action(t, action)
    if len(rest) == len(a.params) + 1:
        rest, prio = rest[:-1], rest[-1]
    return entities.parse_table_entry(schema, table, action, keys, rest, prio)


def cmd_table_add(ctx: Ctx, kind: int = ops.INSERT) -> int:
    a = ctx.args
    with _session(ctx) as (client, schema):
        e = _entry_from_words(schema, a.table, a.action, a.words)
        ops.write_batch(client, schema, kind, [e])
        verb = "added" if kind == ops.INSERT else "modified"
        ctx.emit(_entry_json(schema, e), f"entry {verb} in {schema.table(a.table).alias}: "
                 f"{_entry_row(schema, e)['match']}")
    return 0


def cmd_table_modify(ctx: Ctx) -> int:
    return cmd_table_add(ctx, ops.MODIFY)


def cmd_table_delete(ctx: Ctx) -> int:
    a = ctx.args
    with _session(ctx) as (client, schema):
        e = _entry_from_words(schema, a.table, None, a.words)
        ops.write_batch(client, schema, ops.DELETE, [e])
        ctx.emit(_entry_json(schema, e), f"entry deleted from {schema.table(a.table).alias}: "
                 f"{_entry_row(schema, e)['match']}")
    return 0


def cmd_table_set_default(ctx: Ctx) -> int:
    a = ctx.args
    with _session(ctx) as (client, schema):
        t = schema.table(a.table)
        act = schema.table_action(t, a.action)
        if len(a.params) != len(act.params):
            raise LiteralError(f"action {act.alias!r} takes {len(act.params)} parameter(s) "
                               f"({', '.join(p.name for p in act.params) or 'none'}), "
                               f"got {len(a.params)}")
        pv = tuple(values.parse_int(v, p.bitwidth, f"parameter {p.name!r}")
                   for p, v in zip(act.params, a.params))
        e = TableEntry(t.name, (), act.name, pv, 0, True)
        ops.write_batch(client, schema, ops.MODIFY, [e])
        ctx.emit(_entry_json(schema, e), f"default of {t.alias} set to {act.alias}")
    return 0


def cmd_table_dump(ctx: Ctx) -> int:
    a = ctx.args
    with _session(ctx) as (client, schema):
        t = schema.table(a.table)
        entries = ops.read_entries(client, schema, t.name, with_counters=True)
        default = ops.read_default(client, schema, t.name)
    shown = entries + ([default] if default is not None else [])
    text = f"table {t.name} ({len(entries)} entries, size {t.size})\n" + \
        render.table([_entry_row(schema, e) for e in shown])
    ctx.emit([_entry_json(schema, e) for e in shown], text)
    return 0


def cmd_table_clear(ctx: Ctx) -> int:
    with _session(ctx) as (client, schema):
        n = ops.clear_table(client, schema, ctx.args.table)
        ctx.emit({"deleted": n}, f"{n} entries deleted from {schema.table(ctx.args.table).alias}")
    return 0


# -- counters ---------------------------------------------------------------------------------

def cmd_counter_read(ctx: Ctx) -> int:
    a = ctx.args
    with _session(ctx) as (client, schema):
        index = None if a.index is None else values.parse_int(a.index, 32, "index")
        cells = ops.read_counter(client, schema, a.counter, index)
    if index is None:
        cells = [c for c in cells if c.packets or c.bytes] or cells[:0]
    rows = [{"index": c.index, "packets": c.packets, "bytes": c.bytes} for c in cells]
    note = "" if index is not None else " (non-zero cells)"
    ctx.emit(rows, f"counter {schema.counter(a.counter).name}{note}\n" + render.table(rows))
    return 0


def cmd_counter_reset(ctx: Ctx) -> int:
    a = ctx.args
    with _session(ctx) as (client, schema):
        index = None if a.index is None else values.parse_int(a.index, 32, "index")
        ops.reset_counter(client, schema, a.counter, index)
    ctx.emit({"reset": a.counter}, f"counter {a.counter} reset")
    return 0


# -- multicast (P4Runtime PRE: groups of (port, rid) replicas; no node handles) ---------------

def _mgid(text: str) -> int:
    v = values.parse_int(text, 16, "multicast group id")
    if not 1 <= v <= 32767:
        raise LiteralError(f"multicast group id {v} is out of range 1..32767")
    return v


def _replica(text: str) -> tuple[int, int]:
    port, _, rid = text.partition(":")
    return (values.parse_int(port, 9, "port"), values.parse_int(rid or "0", 16, "rid"))


def cmd_mc_mgrp_create(ctx: Ctx) -> int:
    g = MulticastGroup(_mgid(ctx.args.mgid), tuple(_replica(r) for r in ctx.args.replicas))
    with _session(ctx) as (client, schema):
        ops.write_batch(client, schema, ops.INSERT, [g])
    ctx.emit({"mgid": g.mgid, "replicas": g.replicas},
             f"multicast group {g.mgid} created with {len(g.replicas)} replicas")
    return 0


def cmd_mc_mgrp_destroy(ctx: Ctx) -> int:
    mgid = _mgid(ctx.args.mgid)
    with _session(ctx) as (client, schema):
        ops.write_batch(client, schema, ops.DELETE, [MulticastGroup(mgid)])
    ctx.emit({"mgid": mgid}, f"multicast group {mgid} deleted")
    return 0


def cmd_mc_node_associate(ctx: Ctx) -> int:
    a = ctx.args
    mgid, rid = _mgid(a.mgid), values.parse_int(a.rid, 16, "rid")
    ports = [values.parse_int(p, 9, "port") for p in a.ports]
    with _session(ctx) as (client, _):
        g = ops.group_add_replicas(client, mgid, [(p, rid) for p in ports])
    ctx.emit({"mgid": g.mgid, "replicas": g.replicas},
             f"multicast group {mgid}: rid {rid} on ports {', '.join(map(str, ports))}")
    return 0


def cmd_mc_node_dissociate(ctx: Ctx) -> int:
    a = ctx.args
    mgid, rid = _mgid(a.mgid), values.parse_int(a.rid, 16, "rid")
    with _session(ctx) as (client, _):
        g = ops.group_remove_rid(client, mgid, rid)
    ctx.emit({"mgid": g.mgid, "replicas": g.replicas}, f"multicast group {mgid}: rid {rid} removed")
    return 0


def cmd_mc_dump(ctx: Ctx) -> int:
    with _session(ctx) as (client, _):
        groups = ops.read_groups(client)
    rows = [{"mgid": g.mgid, "replicas": " ".join(f"{p}:{r}" for p, r in g.replicas)}
            for g in groups]
    ctx.emit([{"mgid": g.mgid, "replicas": [list(r) for r in g.replicas]} for g in groups],
             "multicast groups (replicas as port:rid)\n" + render.table(rows))
    return 0


# -- pipeline ---------------------------------------------------------------------------------

def cmd_pipeline_push(ctx: Ctx) -> int:
    program = _program(ctx)
    if ctx.args.topo and not ctx.args.grpc_addr_given and not ctx.args.switch:
        with _controller(ctx, program, adopt=False) as ctl:
            ctl.push_pipeline()
            names = list(ctl.clients)
    else:
        client = SwitchClient(_endpoint(ctx), ctx.args.timeout)
        client.connect()
        try:
            client.set_pipeline(program.p4info, program.device_config, program.cookie)
        finally:
            client.close()
        names = [str(client.endpoint)]
    ctx.emit({"pushed": names, "cookie": program.cookie},
             f"pipeline pushed to {', '.join(names)} (cookie {program.cookie:#x})")
    return 0


def cmd_pipeline_show(ctx: Ctx) -> int:
    client = SwitchClient(_endpoint(ctx), ctx.args.timeout)
    client.connect()
    try:
        got = client.get_pipeline()
        primary = client.is_primary
    finally:
        client.close()
    if got is None:
        ctx.emit({"pipeline": None}, f"switch {client.endpoint}: no pipeline")
        return 0
    info, cookie = got
    s = Schema(info)
    data = {"cookie": cookie, "tables": [t.name for t in s.tables],
            "counters": [c.name for c in s.counters], "primary": primary}
    ctx.emit(data, f"switch {client.endpoint}: cookie {cookie:#x}, {len(data['tables'])} "
             f"tables, {len(data['counters'])} counters; this session is "
             f"{'primary' if primary else 'backup'}\n" +
             render.table([{"table": t.name, "size": t.size,
                            "key": " ".join(f"{f.name}:{f.kind.value}" for f in t.key)}
                           for t in s.tables]))
    return 0


# -- topology-wide: setup, jobs, stats, drop simulator ----------------------------------------

def cmd_setup(ctx: Ctx) -> int:
    program = _program(ctx)
    with _controller(ctx, program, adopt=False) as ctl:
        ctl.push_pipeline()
        ctl.install_forwarding()
        for spec in ctl.topo.jobs:
            ctl.create_job(spec)
        rows = _job_rows(ctl)
    ctx.emit(rows, f"pipeline, forwarding and {len(ctl.topo.jobs)} job(s) installed on "
             f"{len(ctl.topo.switches)} switch(es)\n" + render.table(rows))
    return 0


def _job_rows(ctl: Controller) -> list[dict[str, Any]]:
    return [{"job": j.spec.id, "switch": p.switch, "role": p.role.value, "slots": str(p.slots),
             "contributors": len([e for e in p.entries if e.table == P.MEMBER]),
             "mgid": p.group.mgid} for j in sorted(ctl.jobs.values(), key=lambda j: j.spec.id)
            for p in j.plans]


def cmd_job_create(ctx: Ctx) -> int:
    a = ctx.args
    with _controller(ctx) as ctl:
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
    with _controller(ctx) as ctl:
        rows = _job_rows(ctl)
        free = [{"switch": n, "free_slots": al.free, "pool": al.size}
                for n, al in ctl.allocators.items()]
    ctx.emit({"jobs": rows, "slots": free}, render.table(rows) + "\n\n" + render.table(free))
    return 0


def cmd_job_delete(ctx: Ctx) -> int:
    with _controller(ctx) as ctl:
        ctl.delete_job(ctx.args.job_id)
    ctx.emit({"deleted": ctx.args.job_id}, f"job {ctx.args.job_id} deleted")
    return 0


def cmd_job_reset(ctx: Ctx) -> int:
    with _controller(ctx) as ctl:
        ctl.reset_job(ctx.args.job_id)
    ctx.emit({"reset": ctx.args.job_id}, f"job {ctx.args.job_id} reset (entries re-asserted, "
             "counters zeroed)")
    return 0


_STAT_COLS = ["job", "switch", "role", "slots"] + [c for c, _ in P.JOB_COUNTERS]


def cmd_stats(ctx: Ctx) -> int:
    a = ctx.args
    with _controller(ctx) as ctl:
        n = 0
        while True:
            rows = ctl.job_stats()
            if a.watch and not a.json and ctx.out.isatty():
                ctx.out.write("\x1b[H\x1b[2J")
            stamp = time.strftime("%H:%M:%S")
            ctx.emit(rows, f"per-job counters at {stamp}\n" + render.table(rows, _STAT_COLS))
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
        with _controller(ctx) as ctl:
            name = a.switch or (ctl.topo.switches[0].name if len(ctl.topo.switches) == 1
                                else None)
            if name is None:
                raise ControllerError("say which switch with --switch")
            ctl.set_drop(name, a.port, a.probability, a.direction)
    else:
        from controller.jobs import plan_drop
        with _session(ctx) as (client, schema):
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
    """Set everything up, then watch the switches and restore any that restart."""
    a = ctx.args
    program = _program(ctx)
    with _controller(ctx, program, adopt=False) as ctl:
        ctl.push_pipeline()
        ctl.install_forwarding()
        for spec in ctl.topo.jobs:
            ctl.create_job(spec)
        ctx.out.write(f"controller running: {len(ctl.topo.switches)} switch(es), "
                      f"{len(ctl.jobs)} job(s); checking every {a.interval:g} s\n")
        ctx.out.flush()
        try:
            while True:
                time.sleep(a.interval)
                ctl.check(lambda name, why: (ctx.out.write(
                    f"restored {name} ({why})\n"), ctx.out.flush()))
        except KeyboardInterrupt:
            return 0


def cmd_shell(ctx: Ctx) -> int:
    """Hand the terminal to p4runtime-shell on the same switch (same ids: explicit)."""
    ep = _endpoint(ctx)
    argv = [sys.executable, "-m", "p4runtime_sh", "--grpc-addr", ep.address,
            "--device-id", str(ep.device_id),
            "--election-id", f"{ep.election_id[0]},{ep.election_id[1]}"]
    if ctx.args.p4info and ctx.args.bmv2_json:
        argv += ["--config", f"{ctx.args.p4info},{ctx.args.bmv2_json}"]
    if ctx.args.dry_run:
        ctx.emit({"argv": argv}, " ".join(argv))
        return 0
    # Probe first so an unreachable switch gives our one-line error, not the shell's exit.
    probe = SwitchClient(ep, ctx.args.timeout)
    probe.connect()
    probe.close()
    os.execv(sys.executable, argv)
    return 0  # not reached


COMMANDS = {
    "table_add": cmd_table_add, "table_modify": cmd_table_modify,
    "table_delete": cmd_table_delete, "table_set_default": cmd_table_set_default,
    "table_dump": cmd_table_dump, "table_clear": cmd_table_clear,
    "counter_read": cmd_counter_read, "counter_reset": cmd_counter_reset,
    "mc_mgrp_create": cmd_mc_mgrp_create, "mc_mgrp_destroy": cmd_mc_mgrp_destroy,
    "mc_node_associate": cmd_mc_node_associate, "mc_node_dissociate": cmd_mc_node_dissociate,
    "mc_dump": cmd_mc_dump,
    "pipeline push": cmd_pipeline_push, "pipeline show": cmd_pipeline_show,
    "setup": cmd_setup, "run": cmd_run,
    "job create": cmd_job_create, "job list": cmd_job_list, "job delete": cmd_job_delete,
    "job reset": cmd_job_reset, "stats": cmd_stats, "dropsim set": cmd_dropsim_set,
    "shell": cmd_shell,
}
