"""The controller proper: one topology's switches, configured consistently and kept so.

`Controller` owns, per switch, a ledger of everything it installed (multicast groups, table
entries, in install order), the slot allocator, and the jobs.  Every change is planned first
(pure, `jobs.py`), then written switch by switch; if a later switch refuses, the earlier
switches are rolled back, so no operation leaves a job half-installed anywhere.  The ledger is
what `restore` replays when a switch comes back empty (restart: the stream drops, or Read/Write
answer FAILED_PRECONDITION), and what `adopt` rebuilds from the switches when a fresh process
(e.g. one `netsum-ctl` invocation) takes over.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

from p4.config.v1 import p4info_pb2

from netsum.controller import ops
from netsum.controller import program as P
from netsum.controller.errors import ControllerError, JobError
from netsum.controller.jobs import JobPlan, place_job, plan_drop, plan_forwarding, plan_job
from netsum.controller.slots import SlotAllocator, SlotRange
from netsum.controller.topology import JobSpec, Role, Topology
from netsum.match import Exact
from netsum.p4rt.cells import CounterCell
from netsum.p4rt.client import Endpoint, SwitchClient
from netsum.p4rt.entities import TableEntry
from netsum.p4rt.errors import NotPrimary, PipelineMissing, SwitchUnreachable
from netsum.p4rt.pre import MulticastGroup
from netsum.p4rt.schema import Schema, load_p4info

__all__ = ["Program", "Job", "SwitchLedger", "Controller", "load_program"]

_Item = TableEntry | MulticastGroup
#: SetForwardingPipelineConfig's deadline, at least: loading a program is the switch's heaviest
#: call (netsum-switch builds its native pipeline for it; a K=2048 program is a 13 MB JSON that
#: took 36 s on a loaded 2-core machine), so it must not share the deadline of a table write.
PIPELINE_TIMEOUT_S = 60.0
#: ... plus this many seconds per MB of device config.
PIPELINE_TIMEOUT_PER_MB_S = 20.0
_Step = tuple[int, _Item, _Item | None]


@dataclass(frozen=True, slots=True)
class Program:
    """A compiled pipeline: P4Info + target config (BMv2 JSON bytes).  The cookie names it, so a
    switch running something else (or nothing, after a restart) is recognised."""
    p4info: p4info_pb2.P4Info
    device_config: bytes

    @property
    def cookie(self) -> int:
        h = hashlib.sha256(self.p4info.SerializeToString(deterministic=True) + self.device_config)
        return int.from_bytes(h.digest()[:8], "big") >> 1   # fits uint64 comfortably


def load_program(p4info_path: str | Path, json_path: str | Path) -> Program:
    try:
        config = Path(json_path).read_bytes()
    except OSError as exc:
        raise ControllerError(f"cannot read BMv2 JSON {str(json_path)!r}: "
                              f"{exc.strerror or exc}") from None
    return Program(load_p4info(p4info_path), config)


@dataclass(frozen=True, slots=True)
class Job:
    spec: JobSpec
    plans: tuple[JobPlan, ...]        # one per switch the job touches

    def plan_on(self, switch: str) -> JobPlan | None:
        return next((p for p in self.plans if p.switch == switch), None)


@dataclass(slots=True)
class SwitchLedger:
    """What the controller installed on one switch (mutable bookkeeping, not an entity)."""
    groups: dict[int, MulticastGroup] = field(default_factory=dict)
    entries: dict[tuple[object, ...], TableEntry] = field(default_factory=dict)

    def apply(self, steps: Sequence[_Step]) -> None:
        for kind, item, _ in steps:
            book: dict = self.groups if isinstance(item, MulticastGroup) else self.entries
            key = item.mgid if isinstance(item, MulticastGroup) else item.identity()
            if kind == ops.DELETE:
                book.pop(key, None)
            else:
                book[key] = item


class Controller:
    def __init__(self, topo: Topology, program: Program | None = None,
                 timeout: float = 5.0) -> None:
        self.topo = topo
        self.program = program
        self.clients = {s.name: SwitchClient(Endpoint(s.grpc_addr, s.device_id, s.election_id),
                                             timeout) for s in topo.switches}
        self.schemas: dict[str, Schema] = {}
        self.ledgers = {s.name: SwitchLedger() for s in topo.switches}
        self.allocators = {s.name: SlotAllocator(s.slots, s.name) for s in topo.switches}
        self.jobs: dict[int, Job] = {}
        self._unrestored: set[str] = set()

    # -- sessions -------------------------------------------------------------------------------
    def connect(self) -> None:
        opened = []
        try:
            for name, c in self.clients.items():
                c.connect()
                opened.append(c)
                if not c.is_primary:
                    h, lo = c.endpoint.election_id or (0, 0)
                    raise ControllerError(f"switch {name} ({c.endpoint.address}): another "
                                          f"controller is primary; election id {h},{lo} is "
                                          "not the highest")
        except ControllerError:
            for c in opened:
                c.close()
            raise

    def close(self) -> None:
        for c in self.clients.values():
            c.close()

    def __enter__(self) -> "Controller":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema(self, switch: str) -> Schema:
        if switch not in self.schemas:
            if self.program is not None:
                self.schemas[switch] = Schema(self.program.p4info)
            else:
                got = self.clients[switch].get_pipeline()
                if got is None:
                    raise PipelineMissing(f"switch {switch} has no forwarding pipeline; push one "
                                          "first (`netsum-ctl pipeline push`)")
                self.schemas[switch] = Schema(got[0])
            self._check_pool(switch, self.schemas[switch])
        return self.schemas[switch]

    def _check_pool(self, switch: str, schema: Schema) -> None:
        sw = self.topo.switch(switch)
        pool = P.slot_pool(schema, sw.slots)
        if pool < sw.slots:
            raise ControllerError(f"switch {switch}: the topology gives it {sw.slots} slots "
                                  f"but the program has only {pool}")

    # -- pipeline and forwarding ----------------------------------------------------------------
    def push_pipeline(self, switches: Iterable[str] | None = None) -> None:
        """Install the program (VERIFY_AND_COMMIT: the switch starts empty) and forget what
        the ledger said about those switches."""
        if self.program is None:
            raise ControllerError("no program to push (give --p4info and a BMv2 JSON)")
        names = list(switches or self.clients)
        # Refused before the first push: a push empties the switch, running jobs included.
        schema = Schema(self.program.p4info)
        for name in names:
            self._check_pool(name, schema)
        for name in names:
            self._set_pipeline(self.clients[name])
            self.schemas[name] = schema
            self.ledgers[name] = SwitchLedger()
            self.allocators[name] = SlotAllocator(self.topo.switch(name).slots, name)
            for job_id in [j for j, job in self.jobs.items() if job.plan_on(name)]:
                del self.jobs[job_id]

    def _set_pipeline(self, client: SwitchClient) -> None:
        """SetForwardingPipelineConfig with the program, under PIPELINE_TIMEOUT_S's deadline
        (or the client's, when that is longer; none when the client has none)."""
        assert self.program is not None
        timeout = client.timeout
        if timeout is not None:
            mb = len(self.program.device_config) / 1e6
            timeout = max(timeout, PIPELINE_TIMEOUT_S + PIPELINE_TIMEOUT_PER_MB_S * mb)
        client.set_pipeline(self.program.p4info, self.program.device_config,
                            self.program.cookie, timeout=timeout)

    def install_forwarding(self) -> None:
        changes: dict[str, list[_Step]] = {}
        for sw in self.topo.switches:
            entries, groups = plan_forwarding(self.topo, self.schema(sw.name), sw)
            changes[sw.name] = [self._upsert(sw.name, g) for g in groups] + \
                [self._upsert(sw.name, e) for e in entries]
        self._transact(changes)

    def _upsert(self, switch: str, item: _Item) -> _Step:
        led = self.ledgers[switch]
        prev = led.groups.get(item.mgid) if isinstance(item, MulticastGroup) else \
            led.entries.get(item.identity())
        return (ops.INSERT if prev is None else ops.MODIFY, item, prev)

    # -- jobs -----------------------------------------------------------------------------------
    def create_job(self, spec: JobSpec, metadata: bytes = b"") -> Job:
        """Slots, entries and group on every switch the job touches, all or nothing.
        `metadata` goes on its `job` entries (P4Runtime's cookie: a lease, leases.py)."""
        if spec.id in self.jobs:
            raise JobError(f"job {spec.id} already exists (delete it first, or pick another id)")
        places = place_job(self.topo, spec)
        granted: dict[str, SlotRange] = {}
        try:
            for name in places:
                granted[name] = self.allocators[name].allocate(spec.id, spec.slots)
            plans = tuple(plan_job(self.topo, self.schema(n), spec, places[n], granted[n])
                          for n in places)
            if metadata:
                plans = tuple(replace(p, entries=tuple(
                    replace(e, metadata=metadata) if e.table == P.JOB else e
                    for e in p.entries)) for p in plans)
            changes = {p.switch: [(ops.INSERT, p.group, None)] +
                       [(ops.INSERT, e, None) for e in p.entries] +
                       self._epoch_steps(p.switch, spec.id) for p in plans}
            self._transact(changes)
        except ControllerError:
            for name in granted:
                self.allocators[name].release(spec.id)
            raise
        job = Job(spec, plans)
        self.jobs[spec.id] = job
        # The switch keeps a deleted job's counter cells: a job created under a used id would
        # report its predecessor's packets as its own.
        self._zero_counters(job)
        return job

    def delete_job(self, job_id: int, record: bytes | None = None) -> Job:
        """Remove the job's entries and group everywhere and free its slots.  With `record` (a
        reclaim, controller/watchdog.py) the same transaction also moves the job to its next
        epoch, so packets still in flight for it are stale, and the epoch entry, which outlives
        the job, keeps `record` as its metadata: what `job list` shows of reclaimed jobs."""
        job = self._job(job_id)
        changes: dict[str, list[_Step]] = {
            p.switch: [(ops.DELETE, e, e) for e in reversed(p.entries)] +
            [(ops.DELETE, p.group, p.group)] +
            (self._epoch_steps(p.switch, job_id, record) if record is not None else [])
            for p in job.plans}
        self._transact(changes)
        for p in job.plans:
            self.allocators[p.switch].release(job_id)
        del self.jobs[job_id]
        return job

    def reset_job(self, job_id: int) -> Job:
        """Start the job afresh: a new epoch (rounds left in its slots no longer count), its
        counters zeroed, its entries and groups re-asserted (MODIFY to the planned values, which
        repairs anything changed by hand)."""
        job = self._job(job_id)
        changes = {p.switch: [(ops.MODIFY, p.group, p.group)] +
                   [(ops.MODIFY, e, e) for e in p.entries] +
                   self._epoch_steps(p.switch, job_id) for p in job.plans}
        self._transact(changes)
        self._zero_counters(job)
        return job

    def _zero_counters(self, job: Job) -> None:
        """Zero the job's per-job counter cells (index job id) on every switch it touches."""
        for p in job.plans:
            cells = [CounterCell(name, job.spec.id) for _, name in P.JOB_COUNTERS]
            ops.write_batch_cells(self.clients[p.switch], self.schema(p.switch), cells)

    def _epoch_steps(self, switch: str, job_id: int, record: bytes = b"") -> list[_Step]:
        """Move `job_id` to its next epoch on `switch` (when the program has epochs).  The
        epoch entry outlives the job on purpose: a later job with the same id must not reuse
        the epoch of the rounds this one leaves in the registers."""
        schema = self.schema(switch)
        if P.EPOCH not in schema.tables.by_name:
            return []
        key = P.entry(schema, P.EPOCH, {"job_id": job_id}, "set_epoch", {"epoch": 0})
        prev = self.ledgers[switch].entries.get(key.identity())
        epoch = P.next_epoch(prev.params[0] if prev is not None else 0)
        new = replace(P.entry(schema, P.EPOCH, {"job_id": job_id}, "set_epoch",
                              {"epoch": epoch}), metadata=record)
        return [(ops.INSERT if prev is None else ops.MODIFY, new, prev)]

    def _job(self, job_id: int) -> Job:
        if job_id not in self.jobs:
            known = ", ".join(str(j) for j in sorted(self.jobs)) or "none"
            raise JobError(f"no job {job_id} (jobs: {known})")
        return self.jobs[job_id]

    # -- drop simulator -------------------------------------------------------------------------
    def set_drop(self, switch: str, port: int, probability: float, direction: str = "in") -> None:
        sw = self.topo.switch(switch)
        if port not in sw.ports:
            raise ControllerError(f"switch {switch} has no port {port} (ports: "
                                  f"{', '.join(map(str, sw.ports))})")
        entries = plan_drop(self.schema(switch), port, probability, direction)
        self._transact({switch: [self._upsert(switch, e) for e in entries]})

    # -- statistics -----------------------------------------------------------------------------
    def job_stats(self) -> list[dict[str, object]]:
        """One row per (job, switch): the per-job counters at index job id (counters, not
        registers: real simple_switch_grpc does not serve register reads)."""
        rows = []
        for job_id, job in sorted(self.jobs.items()):
            for p in job.plans:
                schema = self.schema(p.switch)
                cells = {}
                reads = [CounterCell(name, job_id).encode(schema) for _, name in P.JOB_COUNTERS]
                for ent in reads:
                    ent.counter_entry.ClearField("data")
                for ent in self.clients[p.switch].read(reads):
                    c = CounterCell.decode(ent, schema)
                    cells[c.counter] = c
                row: dict[str, object] = {"job": job_id, "switch": p.switch,
                                          "role": p.role.value, "slots": str(p.slots)}
                for col, name in P.JOB_COUNTERS:
                    row[col] = cells[name].packets if name in cells else 0
                rows.append(row)
        return rows

    def port_stats(self) -> list[dict[str, object]]:
        """One row per (switch, port): packets the drop simulator dropped in each direction."""
        rows = []
        for sw in self.topo.switches:
            schema = self.schema(sw.name)
            got: dict[str, dict[int, int]] = {}
            for col, name in P.PORT_COUNTERS:
                cells = ops.read_counter(self.clients[sw.name], schema, name)
                got[col] = {c.index: c.packets for c in cells}
            for port in sw.ports:
                rows.append({"switch": sw.name, "port": port,
                             **{col: got[col].get(port, 0) for col, _ in P.PORT_COUNTERS}})
        return rows

    # -- transactions ---------------------------------------------------------------------------
    def _transact(self, changes: dict[str, list[_Step]]) -> None:
        """Apply per-switch steps on every switch or none.  A switch found restarted (stream
        down, or no pipeline) is restored first, and the whole change retried once: the ledger
        only holds what succeeded, so replaying it then applying the change is consistent."""
        for name in changes:
            if not self.clients[name].connected or name in self._unrestored:
                self._recover(name, self.clients[name].timeout or 5.0)
        try:
            self._transact_once(changes)
        except (PipelineMissing, NotPrimary) as exc:
            # Either can mean a restart our stream has not noticed yet: the switch forgot the
            # pipeline, or it never arbitrated this (reconnected) channel.  Arbitrate afresh and
            # restore; a genuine other primary makes the retry fail again, and that is raised.
            if self.program is None:
                raise
            lost = exc.switch
            for name in [lost] if lost is not None and lost in changes else list(changes):
                self._recover(name, self.clients[name].timeout or 5.0, force=True)
            self._transact_once(changes)

    def _transact_once(self, changes: dict[str, list[_Step]]) -> None:
        """Apply per-switch steps; all switches or none (earlier switches are rolled back)."""
        done: list[tuple[str, list[_Step]]] = []
        try:
            for name, steps in changes.items():
                if steps:
                    ops.apply_all_or_nothing(self.clients[name], self.schema(name), steps)
                    done.append((name, steps))
        except ControllerError as exc:
            failed_on = name
            exc.switch = failed_on
            for prev_name, steps in reversed(done):
                try:
                    ops.apply_all_or_nothing(self.clients[prev_name], self.schema(prev_name),
                                             _inverse(steps))
                except ControllerError as undo:
                    raise ControllerError(f"{failed_on}: {exc.message}; rolling back "
                                          f"{prev_name} also failed: {undo.message}") from None
            if len(changes) > 1:
                # Several switches: say which one refused (the message alone would not).
                exc.message = f"switch {failed_on}: {exc.message}"
                exc.args = (exc.message,)
            raise
        for name, steps in done:
            self.ledgers[name].apply(steps)

    # -- adopt and restore ----------------------------------------------------------------------
    def adopt(self) -> None:
        """Rebuild the ledger, allocators and jobs from what the switches hold."""
        jobs: dict[int, list[tuple[JobPlan, tuple[int, ...]]]] = {}
        for sw in self.topo.switches:
            client, schema = self.clients[sw.name], self.schema(sw.name)
            led = SwitchLedger()
            for g in ops.read_groups(client):
                led.groups[g.mgid] = g
            entries = [e for e in ops.read_entries(client, schema) if not e.is_const]
            for e in entries:
                led.entries[e.identity()] = e
            self.ledgers[sw.name] = led
            alloc = SlotAllocator(sw.slots, sw.name)
            for e in entries:
                if e.table != P.JOB:
                    continue
                job_id = _exact_key(e, 0)
                plan = _plan_from_switch(sw.name, schema, e, entries, led.groups)
                alloc.reserve(job_id, plan.slots)
                jobs.setdefault(job_id, []).append((plan, ()))
            self.allocators[sw.name] = alloc
        self.jobs = {}
        for job_id, plans in jobs.items():
            workers = tuple(h.name for p, _ in plans for h in self.topo.hosts
                            if h.switch == p.switch and any(
                                e.table == P.MEMBER and _exact_key(e, 1) == h.port
                                and _exact_key(e, 2) == h.ipv4 and _exact_key(e, 3) == h.mac
                                for e in p.entries))
            spec = JobSpec(job_id, workers, plans[0][0].slots.count)
            self.jobs[job_id] = Job(spec, tuple(p for p, _ in plans))

    def check(self, on_restore: Callable[[str, str], None] | None = None,
              probe_timeout: float = 1.0) -> list[str]:
        """Notice switches that lost their state and restore them; returns the names restored.
        A switch that is down, or whose restore failed half-way, is tried again next call."""
        restored = []
        for name in self.clients:
            try:
                reason = self._recover(name, probe_timeout)
            except SwitchUnreachable:
                continue
            except ControllerError as exc:
                if on_restore is not None:
                    on_restore(name, f"restore failed, will retry: {exc.message}")
                continue
            if reason is not None:
                restored.append(name)
                if on_restore is not None:
                    on_restore(name, reason)
        return restored

    def _recover(self, name: str, probe_timeout: float, force: bool = False) -> str | None:
        """Reconnect `name` if its stream is down and restore it if its state is gone (or a
        previous restore stopped half-way: `_unrestored` remembers that even though the
        pipeline is back).  Returns why it restored, or None when nothing was lost."""
        client = self.clients[name]
        reason = "previous restore incomplete" if name in self._unrestored else None
        fresh = False
        if force or not client.connected:
            client.connect(probe_timeout)
            fresh = True
            reason = reason or "stream reconnected"
        cookie = client.get_cookie()
        if cookie is None:
            reason = "pipeline missing"
        elif self.program is not None and cookie != self.program.cookie:
            reason = "pipeline replaced"
        elif reason == "stream reconnected":
            return None     # same pipeline after a stream blip: nothing was lost
        if reason is None:
            return None
        if not fresh:
            # The old stream may not have noticed the restart yet (its channel reconnects by
            # itself, so reads work); the new server has not arbitrated it, and would answer
            # the restore's writes with "not primary".  Arbitrate again first.
            client.connect(probe_timeout)
        self._unrestored.add(name)
        self.restore(name)
        self._unrestored.discard(name)
        return reason

    def restore(self, switch: str) -> None:
        """Push the pipeline to `switch` and replay everything the ledger says it holds."""
        if self.program is None:
            raise ControllerError(f"cannot restore {switch}: no program to push")
        client = self.clients[switch]
        led = self.ledgers[switch]
        self._set_pipeline(client)
        schema = self.schemas[switch] = Schema(self.program.p4info)
        ops.write_batch(client, schema, ops.INSERT, list(led.groups.values()))
        ops.write_batch(client, schema, ops.INSERT, list(led.entries.values()))


def _inverse(steps: Sequence[_Step]) -> list[_Step]:
    out: list[_Step] = []
    for kind, item, prev in reversed(steps):
        if kind == ops.INSERT:
            out.append((ops.DELETE, item, item))
        elif kind == ops.DELETE and prev is not None:
            out.append((ops.INSERT, prev, None))
        elif kind == ops.MODIFY and prev is not None:
            out.append((ops.MODIFY, prev, item))
    return out


def _exact_key(entry: TableEntry, index: int) -> int:
    """The value of an exact key field of `entry`: every key that the fabric reads back (job id,
    member source address, replica rid) is `exact` in netsum.p4, so anything else means the
    switch runs some other program."""
    m = entry.match[index][1]
    if not isinstance(m, Exact):
        raise ControllerError(f"table {entry.table!r}: key field {entry.match[index][0]!r} is "
                              f"not an exact match; is the switch running netsum.p4?")
    return m.value


def _plan_from_switch(switch: str, schema: Schema, job_entry: TableEntry,
                      entries: list[TableEntry], groups: dict[int, MulticastGroup]) -> JobPlan:
    """A job's JobPlan on one switch, recovered from its `job` entry and the entries that
    reference the same job id (members by key, replicas by rid)."""
    a = schema.action(job_entry.action)
    params = {p.name: v for p, v in zip(a.params, job_entry.params)}
    job_id = _exact_key(job_entry, 0)
    role = Role.LEAF if a.name.endswith("job_leaf") else Role.ROOT
    mine = [job_entry]
    mine += [e for e in entries if e.table == P.MEMBER and
             _exact_key(e, 0) == job_id]
    mine += [e for e in entries if e.table == P.REPLICA and
             _exact_key(e, 0) >> 6 == job_id]
    mine += [e for e in entries if e.table == P.RESULT_PORT and _exact_key(e, 0) == job_id]
    mgid = params.get("mgid", P.job_mgid(job_id))
    group = groups.get(mgid, MulticastGroup(mgid))
    return JobPlan(switch, role, SlotRange(params["slot_base"], params["num_slots"]),
                   tuple(mine), group)
