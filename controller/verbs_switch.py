"""`netsum-ctl` verbs on one switch, in simple_switch_CLI's vocabulary: table entries and
defaults, counters, multicast groups (P4Runtime-native: replicas are (port, rid) pairs, there
are no node handles), the pipeline, and p4runtime-shell on the same switch.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from netsum.controller import ops, queues, render
from netsum.controller.session import Ctx, ctx_endpoint, ctx_program, open_controller, open_switch
from netsum.p4rt import entities, values
from netsum.p4rt.client import SwitchClient
from netsum.p4rt.entities import TableEntry
from netsum.p4rt.errors import LiteralError
from netsum.p4rt.pre import MulticastGroup
from netsum.p4rt.schema import Schema

__all__ = [
    "cmd_table_add", "cmd_table_modify", "cmd_table_delete", "cmd_table_set_default",
    "cmd_table_dump", "cmd_table_clear", "cmd_counter_read", "cmd_counter_reset",
    "cmd_mc_mgrp_create", "cmd_mc_mgrp_destroy", "cmd_mc_node_associate",
    "cmd_mc_node_dissociate", "cmd_mc_dump", "cmd_pipeline_push", "cmd_pipeline_show",
    "cmd_shell", "cmd_set_queue_depth", "cmd_set_queue_rate",
]


# -- formatting -------------------------------------------------------------------------------

def _entry_row(schema: Schema, e: TableEntry) -> dict[str, Any]:
    t = schema.table(e.table)
    widths = {f.name: f.bitwidth for f in t.match_fields}
    match = {name: values.format_match(m, widths[name], name) for name, m in e.match}
    row: dict[str, Any] = {"match": " ".join(f"{k}={v}" for k, v in match.items()) or "*"}
    if e.action:
        a = schema.action(e.action)
        row["action"] = a.alias
        row["params"] = " ".join(f"{p.name}={values.format_int(v, p.bitwidth, p.name)}"
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
    widths = {f.name: f.bitwidth for f in t.match_fields}
    out: dict[str, Any] = {
        "table": e.table, "match": {n: values.format_match(m, widths[n], n) for n, m in e.match},
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
        if t.needs_priority and len(keys) == len(t.match_fields) + 1:
            keys, prio = keys[:-1], keys[-1]
        return entities.parse_table_entry(schema, table, None, keys, [], prio)
    a = schema.table_action(t, action)
    if len(rest) == len(a.params) + 1:
        rest, prio = rest[:-1], rest[-1]
    return entities.parse_table_entry(schema, table, action, keys, rest, prio)


def cmd_table_add(ctx: Ctx, kind: int = ops.INSERT) -> int:
    a = ctx.args
    with open_switch(ctx) as (client, schema):
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
    with open_switch(ctx) as (client, schema):
        e = _entry_from_words(schema, a.table, None, a.words)
        ops.write_batch(client, schema, ops.DELETE, [e])
        ctx.emit(_entry_json(schema, e), f"entry deleted from {schema.table(a.table).alias}: "
                 f"{_entry_row(schema, e)['match']}")
    return 0


def cmd_table_set_default(ctx: Ctx) -> int:
    a = ctx.args
    with open_switch(ctx) as (client, schema):
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
    with open_switch(ctx) as (client, schema):
        t = schema.table(a.table)
        entries = ops.read_entries(client, schema, t.name, with_counters=True)
        default = ops.read_default(client, schema, t.name)
    shown = entries + ([default] if default is not None else [])
    text = f"table {t.name} ({len(entries)} entries, size {t.size})\n" + \
        render.table([_entry_row(schema, e) for e in shown])
    ctx.emit([_entry_json(schema, e) for e in shown], text)
    return 0


def cmd_table_clear(ctx: Ctx) -> int:
    with open_switch(ctx) as (client, schema):
        n = ops.clear_table(client, schema, ctx.args.table)
        ctx.emit({"deleted": n}, f"{n} entries deleted from {schema.table(ctx.args.table).alias}")
    return 0


# -- counters ---------------------------------------------------------------------------------

def cmd_counter_read(ctx: Ctx) -> int:
    a = ctx.args
    with open_switch(ctx) as (client, schema):
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
    with open_switch(ctx) as (client, schema):
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
    with open_switch(ctx) as (client, schema):
        ops.write_batch(client, schema, ops.INSERT, [g])
    ctx.emit({"mgid": g.mgid, "replicas": g.replicas},
             f"multicast group {g.mgid} created with {len(g.replicas)} replicas")
    return 0


def cmd_mc_mgrp_destroy(ctx: Ctx) -> int:
    mgid = _mgid(ctx.args.mgid)
    with open_switch(ctx) as (client, schema):
        ops.write_batch(client, schema, ops.DELETE, [MulticastGroup(mgid)])
    ctx.emit({"mgid": mgid}, f"multicast group {mgid} deleted")
    return 0


def cmd_mc_node_associate(ctx: Ctx) -> int:
    a = ctx.args
    mgid, rid = _mgid(a.mgid), values.parse_int(a.rid, 16, "rid")
    ports = [values.parse_int(p, 9, "port") for p in a.ports]
    with open_switch(ctx) as (client, _):
        g = ops.group_add_replicas(client, mgid, [(p, rid) for p in ports])
    ctx.emit({"mgid": g.mgid, "replicas": g.replicas},
             f"multicast group {mgid}: rid {rid} on ports {', '.join(map(str, ports))}")
    return 0


def cmd_mc_node_dissociate(ctx: Ctx) -> int:
    a = ctx.args
    mgid, rid = _mgid(a.mgid), values.parse_int(a.rid, 16, "rid")
    with open_switch(ctx) as (client, _):
        g = ops.group_remove_rid(client, mgid, rid)
    ctx.emit({"mgid": g.mgid, "replicas": g.replicas}, f"multicast group {mgid}: rid {rid} removed")
    return 0


def cmd_mc_dump(ctx: Ctx) -> int:
    with open_switch(ctx) as (client, _):
        groups = ops.read_groups(client)
    rows = [{"mgid": g.mgid, "replicas": " ".join(f"{p}:{r}" for p, r in g.replicas)}
            for g in groups]
    ctx.emit([{"mgid": g.mgid, "replicas": [list(r) for r in g.replicas]} for g in groups],
             "multicast groups (replicas as port:rid)\n" + render.table(rows))
    return 0


# -- pipeline ---------------------------------------------------------------------------------

def cmd_pipeline_push(ctx: Ctx) -> int:
    program = ctx_program(ctx)
    if ctx.args.topo and not ctx.args.grpc_addr_given and not ctx.args.switch:
        with open_controller(ctx, program, adopt=False) as ctl:
            ctl.push_pipeline()
            names = list(ctl.clients)
    else:
        client = SwitchClient(ctx_endpoint(ctx), ctx.args.timeout)
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
    client = SwitchClient(ctx_endpoint(ctx), ctx.args.timeout)
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
    tables = [t.name for t in s.tables]
    counters = [c.name for c in s.counters]
    data = {"cookie": cookie, "tables": tables, "counters": counters, "primary": primary}
    ctx.emit(data, f"switch {client.endpoint}: cookie {cookie:#x}, {len(tables)} "
             f"tables, {len(counters)} counters; this session is "
             f"{'primary' if primary else 'backup'}\n" +
             render.table([{"table": t.name, "size": t.size,
                            "key": " ".join(f"{f.name}:{f.match_type.label}" for f in t.match_fields)}
                           for t in s.tables]))
    return 0


def cmd_shell(ctx: Ctx) -> int:
    """Hand the terminal to p4runtime-shell on the same switch (same ids: explicit)."""
    ep = ctx_endpoint(ctx)
    high, low = ep.election_id or (0, 1)
    argv = [sys.executable, "-m", "p4runtime_sh", "--grpc-addr", ep.address,
            "--device-id", str(ep.device_id), "--election-id", f"{high},{low}"]
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


# -- egress queues (simple_switch_CLI set_queue_depth / set_queue_rate) -------------------------

def _queue_verb(ctx: Ctx, value_name: str) -> int:
    a = ctx.args
    value = values.parse_int(a.value, 32, f"queue {value_name}")
    port = values.parse_int(a.port, 9, "egress port") if a.port is not None else None
    ep = ctx_endpoint(ctx)
    if value_name == "depth":
        got = queues.set_queue_depth(ep, value, port, a.timeout)
    else:
        got = queues.set_queue_rate(ep, value, port, a.timeout)
    where = f"port {port}" if port is not None else "all ports"
    unit = "packets" if value_name == "depth" else "packets/s (0 = not limited)"
    ctx.emit(got, f"queue {value_name} of {where} on {ep.address} set to {value} {unit}")
    return 0


def cmd_set_queue_depth(ctx: Ctx) -> int:
    return _queue_verb(ctx, "depth")


def cmd_set_queue_rate(ctx: Ctx) -> int:
    return _queue_verb(ctx, "rate")

