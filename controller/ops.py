"""Control operations on one switch, in P4Runtime terms: table entries, default actions,
multicast groups, counters.  Each takes a connected `SwitchClient` and the `Schema` of the
pipeline it runs; each either fully happens or raises (multi-step ones undo what they did).
"""
from __future__ import annotations

from typing import Sequence

from netsum.controller.errors import ControllerError, JobError
from netsum.p4rt.cells import CounterCell, counter_wildcard
from netsum.p4rt.client import SwitchClient
from netsum.p4rt.entities import DELETE, INSERT, MODIFY, TableEntry, table_wildcard, update
from netsum.p4rt.errors import P4RuntimeError
from netsum.p4rt.pre import MulticastGroup, groups_wildcard
from netsum.p4rt.schema import Schema

__all__ = ["INSERT", "MODIFY", "DELETE", "read_entries", "read_default", "read_groups",
           "read_group", "read_counter", "reset_counter", "clear_table", "write_batch",
           "apply_all_or_nothing", "group_add_replicas", "group_remove_rid", "write_batch_cells"]


def write_batch(client: SwitchClient, schema: Schema, kind: int,
                items: Sequence[TableEntry | MulticastGroup]) -> None:
    """One Write with `kind` for every item.  Encoding happens first, so a bad item fails
    before anything is sent."""
    client.write([update(kind, e, schema) for e in items])


def apply_all_or_nothing(client: SwitchClient, schema: Schema,
                         steps: Sequence[tuple[int, TableEntry | MulticastGroup,
                                               TableEntry | MulticastGroup | None]]) -> None:
    """Apply (kind, entity, previous) steps one batch at a time; on failure undo the ones that
    were applied (INSERT → DELETE, MODIFY → MODIFY back to `previous`, DELETE → INSERT
    `previous`) and re-raise.  PI only offers CONTINUE_ON_ERROR, so atomicity is ours."""
    updates = [update(k, e, schema) for k, e, _ in steps]   # encode all before sending any
    try:
        client.write(updates)
    except P4RuntimeError as exc:
        failed = {f.index for f in exc.failures} if exc.failures else set(range(len(steps)))
        undo = []
        for i, (kind, ent, prev) in enumerate(steps):
            if i in failed:
                continue
            if kind == INSERT:
                undo.append(update(DELETE, ent, schema))
            elif kind == MODIFY and prev is not None:
                undo.append(update(MODIFY, prev, schema))
            elif kind == DELETE and prev is not None:
                undo.append(update(INSERT, prev, schema))
        if undo:
            try:
                client.write(list(reversed(undo)))
            except ControllerError as undo_exc:
                raise ControllerError(f"{exc.message}; rolling back also failed: "
                                      f"{undo_exc.message}") from None
        raise


def read_entries(client: SwitchClient, schema: Schema, table: str | None = None,
                 with_counters: bool = False) -> list[TableEntry]:
    t = schema.table(table) if table is not None else None
    return [TableEntry.decode(e, schema)
            for e in client.read([table_wildcard(t, with_counters)])
            if e.HasField("table_entry")]


def read_default(client: SwitchClient, schema: Schema, table: str) -> TableEntry | None:
    t = schema.table(table)
    ent = table_wildcard(t)
    ent.table_entry.is_default_action = True
    got = client.read([ent])
    return TableEntry.decode(got[0], schema) if got else None


def clear_table(client: SwitchClient, schema: Schema, table: str) -> int:
    """Delete every (non-const) entry of a table; returns how many."""
    entries = [e for e in read_entries(client, schema, table) if not e.is_const]
    if entries:
        write_batch(client, schema, DELETE,
                    [TableEntry(e.table, e.match, "", (), e.priority) for e in entries])
    return len(entries)


def read_groups(client: SwitchClient) -> list[MulticastGroup]:
    return sorted((MulticastGroup.decode(e) for e in client.read([groups_wildcard()])
                   if e.HasField("packet_replication_engine_entry")), key=lambda g: g.mgid)


def read_group(client: SwitchClient, mgid: int) -> MulticastGroup | None:
    for g in read_groups(client):
        if g.mgid == mgid:
            return g
    return None


def group_add_replicas(client: SwitchClient, mgid: int,
                       replicas: Sequence[tuple[int, int]]) -> MulticastGroup:
    """Add (port, rid) replicas to an existing group (read-modify-write: P4Runtime has no
    node objects, so a BMv2 "node" is the set of a group's replicas sharing one rid)."""
    g = read_group(client, mgid)
    if g is None:
        raise JobError(f"multicast group {mgid} does not exist (create it with mc_mgrp_create)")
    have = set(g.replicas)
    dup = [r for r in replicas if r in have]
    if dup:
        raise JobError(f"multicast group {mgid} already has port {dup[0][0]} with rid {dup[0][1]}")
    new = MulticastGroup(mgid, g.replicas + tuple(replicas))
    client.write([update(MODIFY, new, None)])
    return new


def group_remove_rid(client: SwitchClient, mgid: int, rid: int) -> MulticastGroup:
    g = read_group(client, mgid)
    if g is None:
        raise JobError(f"multicast group {mgid} does not exist")
    keep = tuple(r for r in g.replicas if r[1] != rid)
    if len(keep) == len(g.replicas):
        raise JobError(f"multicast group {mgid} has no replicas with rid {rid}")
    new = MulticastGroup(mgid, keep)
    client.write([update(MODIFY, new, None)])
    return new


def read_counter(client: SwitchClient, schema: Schema, name: str,
                 index: int | None = None) -> list[CounterCell]:
    cells = [CounterCell.decode(e, schema)
             for e in client.read([counter_wildcard(schema, name, index)])
             if e.HasField("counter_entry")]
    return sorted(cells, key=lambda c: c.index)


def reset_counter(client: SwitchClient, schema: Schema, name: str,
                  index: int | None = None) -> None:
    c = schema.counter(name)
    indices = range(c.size) if index is None else [index]
    counter_wildcard(schema, name, index)   # range check with a clear message
    write_batch_cells(client, schema, [CounterCell(c.name, i) for i in indices])


def write_batch_cells(client: SwitchClient, schema: Schema, cells: Sequence[CounterCell]) -> None:
    client.write([update(MODIFY, c, schema) for c in cells])
