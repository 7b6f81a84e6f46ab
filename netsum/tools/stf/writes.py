"""STF control-plane commands as P4Runtime updates, the way a controller would write them.

p4c's bmv2 driver fed these commands to BMv2's CLI; here each becomes P4Runtime (spec v1.4):
- `add` -> TableEntry INSERT.  Key values follow the CLI's reading of the STF text: a ternary
  hex/binary value masks exactly the digits written (`*` digits and digits never written are
  don't-care), an lpm value without `/len` has the prefix of its written non-`*` digits, keys
  left out are 0 (exact) or wildcards.  STF priorities: the larger wins, as in P4Runtime, but
  0 is allowed, so P4Runtime priority = STF priority + 1; a table with no ternary, range or
  optional key takes none (BMv2's CLI also drops it there).
- `setdefault` -> TableEntry MODIFY of the default entry.
- multicast (`mc_mgrp_create`, `mc_node_create/update/associate`) -> MulticastGroupEntry
  INSERT/MODIFY holding every (port, rid) of the group's nodes; BMv2 numbers nodes 0, 1, ...
  in creation order, and so does `Replication`.
- `mirroring_add S P` -> CloneSessionEntry with one replica; `mirroring_add_mc S G` -> the
  session takes group G's replicas (rewritten when the group changes).
- `counter_write`, `register_write`/`register_reset`, `meter_set_rates` -> CounterEntry,
  RegisterEntry, MeterEntry MODIFY (BMv2 rates are per microsecond, P4Runtime's per second).
The updates are the client library's entities (`netsum.p4rt`), which encode names, ids and
canonical byte strings (spec §8.4); this module owns only what the STF text means.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from netsum.match import Exact, Lpm, Match, MatchKind, Optional, Range, Ternary
from netsum.p4rt.cells import CounterCell, MeterCell, RegisterCell
from netsum.p4rt.entities import DELETE, INSERT, MODIFY, TableEntry, update
from netsum.p4rt.pre import CloneSession, MulticastGroup
from netsum.p4rt.schema import MatchField, Schema, TableInfo
from netsum.tools.stf import names
from netsum.tools.stf.syntax import (ActionCall, Add, CounterWrite, KeyMatch, MeterSetRates,
                                     Number, RegisterReset, RegisterWrite, SetDefault)

__all__ = ["StfValueError", "Unsupported", "table_entry", "default_entry", "counter_write",
           "register_write", "register_reset", "meter_rates", "Replication"]



class StfValueError(ValueError):
    """A value that cannot be written: `*` where none is allowed, a key given twice, ...  (A
    value too wide for its field is the library's LiteralError.)"""


class Unsupported(Exception):
    """An STF command or form that has no P4Runtime equivalent here."""


def _plain(n: Number, what: str) -> int:
    if n.has_wildcards:
        raise StfValueError(f"{what}: '{n}' has '*' digits, which only ternary and lpm keys take")
    return n.value()


def _fits(value: int, width: int, n: Number, what: str) -> None:
    if value >> width:
        raise StfValueError(f"{what}: {n} does not fit in {width} bits")


def _match(mf: MatchField, km: KeyMatch) -> Match | None:
    """The match for one STF key, or None for a wildcard (P4Runtime omits those)."""
    width = mf.bitwidth
    what = f"key '{mf.name}'"
    mt = mf.match_type
    if mt is MatchKind.EXACT:
        if km.prefix_len is not None:
            raise StfValueError(f"{what} is exact: '/{km.prefix_len}' does not apply")
        return Exact(_plain(km.value, what))
    if mt is MatchKind.TERNARY:
        full = (1 << width) - 1
        mask = km.value.digit_mask()
        if mask is None:
            mask = full                   # a decimal value: every bit (p4c's driver refuses it)
        value = km.value.value()
        if value & ~mask:
            raise StfValueError(f"{what}: value {value:#x} has bits outside its digits")
        _fits(value, width, km.value, what)
        mask &= full
        return Ternary(value, mask) if mask else None
    if mt is MatchKind.LPM:
        value = km.value.value()
        if km.prefix_len is not None:
            plen = km.prefix_len
        elif km.value.radix_bits:
            plen = sum(1 for ch in km.value.digits if ch != "*") * km.value.radix_bits
        else:
            plen = width
        _fits(value, width, km.value, what)
        plen = min(plen, width)
        if plen == 0:
            return None
        # BMv2 matches the top `plen` bits of the field-wide value; P4Runtime wants the bits
        # past the prefix zero, so they are masked off (the match is the same).
        return Lpm(value & ((1 << plen) - 1) << (width - plen), plen)
    if mt is MatchKind.RANGE:
        v = _plain(km.value, what)
        return Range(v, v)
    if mt is MatchKind.OPTIONAL:
        return Optional(_plain(km.value, what))
    raise Unsupported(f"{what}: match kind {mt.label}")


def _action(schema: Schema, table: TableInfo, call: ActionCall) -> tuple[str, tuple[int, ...]]:
    """(action name, parameter values in P4Info order) for a call with named arguments."""
    act = names.action(schema, table, call.name)
    given = dict(call.args)
    params = {p.name for p in act.params}
    for name in given:
        if name not in params:
            raise StfValueError(f"action '{act.name}' has no parameter '{name}' "
                                f"(has: {', '.join(p.name for p in act.params) or 'none'})")
    values = []
    for p in act.params:
        if p.name not in given:
            raise StfValueError(f"action '{act.name}': parameter '{p.name}' not given")
        values.append(_plain(given[p.name], f"parameter '{p.name}'"))
    return act.name, tuple(values)


def table_entry(schema: Schema, cmd: Add) -> TableEntry:
    """The TableEntry an `add` means (to be written with INSERT)."""
    table = names.table(schema, cmd.table)
    given: dict[int, KeyMatch] = {}
    for km in cmd.keys:
        mf = names.key_field(table, km.name)
        if mf.id in given:
            raise StfValueError(f"key '{mf.name}' given twice")
        given[mf.id] = km
    match: list[tuple[str, Match]] = []
    for mf in table.match_fields:
        found = given.get(mf.id)
        if found is None and mf.match_type is not MatchKind.EXACT:
            continue                                      # wildcard
        m = _match(mf, found or KeyMatch(mf.name, Number("0")))  # BMv2's driver: exact 0
        if m is not None:
            match.append((mf.name, m))
    priority = (cmd.priority if cmd.priority is not None else 0) + 1 \
        if table.needs_priority else 0
    action, params = _action(schema, table, cmd.action)
    return TableEntry(table.name, tuple(match), action, params, priority)


def default_entry(schema: Schema, cmd: SetDefault) -> TableEntry:
    """The default entry a `setdefault` means (to be written with MODIFY)."""
    table = names.table(schema, cmd.table)
    action, params = _action(schema, table, cmd.action)
    return TableEntry(table.name, (), action, params, is_default=True)


def counter_write(schema: Schema, cmd: CounterWrite) -> p4runtime_pb2.Update:
    c = names.counter(schema, cmd.counter)[1]
    return update(MODIFY, CounterCell(c.name, cmd.index, cmd.packets, cmd.bytes), schema)


def register_write(schema: Schema, cmd: RegisterWrite) -> p4runtime_pb2.Update:
    r = names.register(schema, cmd.register)
    if r.signed or not r.bitwidth:
        raise Unsupported(f"register '{r.name}': only bit<W> cells can be written")
    return update(MODIFY, RegisterCell(r.name, cmd.index, cmd.value), schema)


def register_reset(schema: Schema, cmd: RegisterReset) -> list[p4runtime_pb2.Update]:
    """Every cell to 0, one MODIFY per cell (a wildcard write is not in PI)."""
    r = names.register(schema, cmd.register)
    return [update(MODIFY, RegisterCell(r.name, i, 0), schema) for i in range(r.size)]


def meter_rates(schema: Schema, cmd: MeterSetRates) -> list[p4runtime_pb2.Update]:
    m = names.meter(schema, cmd.meter)
    if len(cmd.rates) != 2:
        raise Unsupported(f"meter '{m.name}': {len(cmd.rates)} rate pairs "
                          f"(a v1model meter has two: committed and peak)")
    (cir, cburst), (pir, pburst) = cmd.rates
    config = (round(cir * 1e6), cburst, round(pir * 1e6), pburst)
    indices = [cmd.index] if cmd.index is not None else list(range(m.size))
    return [update(MODIFY, MeterCell(m.name, i, config), schema) for i in indices]


@dataclass
class Replication:
    """BMv2's multicast and mirroring state as the STF commands build it, turned into the
    P4Runtime PRE entries that express the same replication."""
    nodes: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)   # handle -> (rid, ports)
    groups: dict[int, list[int]] = field(default_factory=dict)              # mgid -> handles
    written: set[int] = field(default_factory=set)                          # groups on the switch
    sessions: dict[int, tuple[str, int]] = field(default_factory=dict)      # sid -> (port|mc, n)

    def create_group(self, mgid: int) -> list[p4runtime_pb2.Update]:
        if mgid in self.groups:
            raise StfValueError(f"multicast group {mgid} created twice")
        self.groups[mgid] = []
        return []             # written once it has members: P4Runtime groups hold replicas

    def create_node(self, rid: int, ports: tuple[int, ...]) -> list[p4runtime_pb2.Update]:
        self.nodes.append((rid, ports))
        return []

    def update_node(self, handle: int, ports: tuple[int, ...]) -> list[p4runtime_pb2.Update]:
        if not 0 <= handle < len(self.nodes):
            raise StfValueError(f"no multicast node {handle}")
        self.nodes[handle] = (self.nodes[handle][0], ports)
        return [u for g, hs in self.groups.items() if handle in hs for u in self._group(g)]

    def associate(self, mgid: int, handle: int) -> list[p4runtime_pb2.Update]:
        if mgid not in self.groups:
            raise StfValueError(f"multicast group {mgid} was not created")
        if not 0 <= handle < len(self.nodes):
            raise StfValueError(f"no multicast node {handle}")
        self.groups[mgid].append(handle)
        return self._group(mgid)

    def replicas(self, mgid: int) -> list[tuple[int, int]]:
        """(egress_port, instance) of every copy, without repeats, in node order."""
        out: list[tuple[int, int]] = []
        for h in self.groups.get(mgid, []):
            rid, ports = self.nodes[h]
            for p in ports:
                if (p, rid) not in out:
                    out.append((p, rid))
        return out

    def _group(self, mgid: int) -> list[p4runtime_pb2.Update]:
        # ordered: the copies leave in node order, as BMv2's (two rids on one port show it).
        group = MulticastGroup(mgid, tuple(self.replicas(mgid)), ordered=True)
        kind = MODIFY if mgid in self.written else INSERT
        self.written.add(mgid)
        ups = [update(kind, group)]
        for sid, (how, n) in self.sessions.items():
            if how == "mc" and n == mgid:
                ups += self._session(sid, how, n)
        return ups

    def mirror(self, sid: int, how: str, n: int) -> list[p4runtime_pb2.Update]:
        return self._session(sid, how, n)

    def _session(self, sid: int, how: str, n: int) -> list[p4runtime_pb2.Update]:
        replicas = ((n, 0),) if how == "port" else tuple(self.replicas(n))
        kind = MODIFY if sid in self.sessions else INSERT
        self.sessions[sid] = (how, n)
        return [update(kind, CloneSession(sid, replicas))]

    def unmirror(self, sid: int) -> list[p4runtime_pb2.Update]:
        if sid not in self.sessions:
            raise StfValueError(f"mirroring session {sid} does not exist")
        del self.sessions[sid]
        return [update(DELETE, CloneSession(sid))]
