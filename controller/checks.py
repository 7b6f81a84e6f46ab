"""What set-up refuses, decided before any switch is touched (pure: no I/O).

`check_setup` plans the whole topology -- forwarding on every switch, every job in file order
with the same first-fit slot allocation and the same planner set-up uses (`jobs.py`) -- against
the program's P4Info, and encodes every entry it would write, so whatever set-up would meet
half-way is met here first:

* a switch pool larger than the program's registers hold (`slot_pool`);
* a job id at or beyond the program's per-job counters (`plan_job`), or whose multicast group,
  replica ids or slot range do not fit the fields the P4Info declares (encoding);
* jobs that do not fit their switches' slot pools together (the allocator's own message);
* more entries for a table than the P4Info's `size` (the 1000-job file: the `job` table
  holds 256), counted with the epoch entry every job gets.

`netsum-ctl setup`/`run` call it before pushing the pipeline, which empties every table and
register of the switch, running jobs included; `topo show` calls it so that it refuses what
set-up refuses, with the same line.  Errors name the file and the item, as the loader does.
"""
from __future__ import annotations

from collections import Counter

from p4.v1 import p4runtime_pb2

from netsum.controller import program as P
from netsum.controller.errors import ControllerError, TopologyError
from netsum.controller.jobs import place_job, plan_forwarding, plan_job
from netsum.controller.slots import SlotAllocator
from netsum.controller.topology import Topology
from netsum.match import Exact
from netsum.p4rt import values
from netsum.p4rt.entities import TableEntry, update
from netsum.p4rt.errors import LiteralError
from netsum.p4rt.schema import Schema

__all__ = ["check_setup", "program_limits"]


def program_limits(schema: Schema) -> dict[str, int]:
    """What the program holds per switch, as its P4Info declares it (0: not declared)."""
    return {"max_job_id": P.max_jobs(schema) - 1, "slot_pool": P.slot_pool(schema, 0),
            "job_table": schema.table(P.JOB).size, "member_table": schema.table(P.MEMBER).size}


def check_setup(topo: Topology, schema: Schema) -> None:
    """Raise the TopologyError set-up would meet (one line: file, item, problem); return when
    every switch's forwarding and every job of the file fit the program and the pools."""
    src = topo.source
    pool = P.slot_pool(schema, 0)
    used: dict[str, Counter[str]] = {s.name: Counter() for s in topo.switches}
    for i, sw in enumerate(topo.switches):
        if pool and sw.slots > pool:
            raise TopologyError(f"{src}: switches[{i}].slots: {sw.slots} is more than the "
                                f"program's pool of {pool} slots")
        try:
            entries, groups = plan_forwarding(topo, schema, sw)
            _encode(schema, entries)
        except ControllerError as exc:
            raise TopologyError(f"{src}: switches[{i}] ({sw.name}): {exc.message}") from None
        _count(schema, used[sw.name], entries, f"{src}: switches[{i}] ({sw.name})", sw.name)
    alloc = {s.name: SlotAllocator(s.slots, s.name) for s in topo.switches}
    epoch = P.EPOCH in schema.tables.by_name
    for i, spec in enumerate(topo.jobs):
        where = f"{src}: jobs[{i}] (job {spec.id})"
        try:
            for name, place in place_job(topo, spec).items():
                plan = plan_job(topo, schema, spec, place, alloc[name].allocate(spec.id,
                                                                                spec.slots))
                _encode(schema, plan.entries)
                extra = [P.entry(schema, P.EPOCH, {"job_id": spec.id}, "set_epoch",
                                 {"epoch": 1})] if epoch else []
                _encode(schema, extra)
                _count(schema, used[name], [*plan.entries, *extra], where, name)
        except TopologyError:
            raise
        except ControllerError as exc:
            raise TopologyError(f"{where}: {exc.message}") from None


def _encode(schema: Schema, entries: list[TableEntry] | tuple[TableEntry, ...]) -> None:
    """Encode each value as the Write would (values.encode, the function TableEntry.encode
    calls): a value wider than its field is refused here, with the encoder's message.  The
    protobuf message itself is not built: pure-Python protobuf takes 1.4 ms an entry, 25 s for
    255 jobs of 32 workers."""
    for e in entries:
        t = schema.table(e.table)
        for name, m in e.match:
            if isinstance(m, Exact):
                try:
                    values.encode(m.value, schema.key_field(t, name).bitwidth)
                except LiteralError as exc:
                    raise LiteralError(f"table {t.alias!r} key {name!r}: {exc.message}") \
                        from None
            else:      # netsum's tables are all exact; anything else the slow, general way
                update(p4runtime_pb2.Update.INSERT, e, schema)
        a = schema.table_action(t, e.action)
        for p, v in zip(a.params, e.params):
            try:
                values.encode(v, p.bitwidth)
            except LiteralError as exc:
                raise LiteralError(f"action {a.alias!r} parameter {p.name!r}: "
                                   f"{exc.message}") from None


def _count(schema: Schema, used: Counter[str], entries: list[TableEntry] |
           tuple[TableEntry, ...], where: str, switch: str) -> None:
    for e in entries:
        used[e.table] += 1
    for table, n in used.items():
        size = schema.table(table).size
        if size and n > size:
            raise TopologyError(f"{where}: table {schema.table(table).alias} on {switch} would "
                                f"hold {n} entries; the program holds {size}")
