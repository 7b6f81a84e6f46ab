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
Values go out in the canonical bytestring form (spec §8.4).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from netsum.stf.schema import Schema
from netsum.stf.syntax import (ActionCall, Add, CounterWrite, KeyMatch, MeterSetRates, Number,
                               RegisterReset, RegisterWrite, SetDefault)

__all__ = ["StfValueError", "Unsupported", "table_entry", "default_entry", "counter_write",
           "register_write", "register_reset", "meter_rates", "Replication", "encode"]

MT = p4info_pb2.MatchField
Update = p4runtime_pb2.Update


class StfValueError(ValueError):
    """A value that cannot be written: too wide for its field, `*` where none is allowed, ..."""


class Unsupported(Exception):
    """An STF command or form that has no P4Runtime equivalent here."""


def encode(value: int, width: int, what: str) -> bytes:
    if value < 0 or value >> width:
        raise StfValueError(f"{what}: {value:#x} does not fit in {width} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def _plain(n: Number, width: int, what: str) -> bytes:
    if n.has_wildcards:
        raise StfValueError(f"{what}: '{n}' has '*' digits, which only ternary and lpm keys take")
    return encode(n.value(), width, what)


def _field_match(mf: Any, km: KeyMatch) -> Any | None:
    """The FieldMatch for one STF key, or None for a wildcard (P4Runtime omits those)."""
    width = mf.bitwidth
    what = f"key '{mf.name}'"
    fm = p4runtime_pb2.FieldMatch(field_id=mf.id)
    mt = mf.match_type
    if mt == MT.EXACT:
        if km.prefix_len is not None:
            raise StfValueError(f"{what} is exact: '/{km.prefix_len}' does not apply")
        fm.exact.value = _plain(km.value, width, what)
        return fm
    if mt == MT.TERNARY:
        full = (1 << width) - 1
        mask = km.value.digit_mask()
        if mask is None:
            mask = full                   # a decimal value: every bit (p4c's driver refuses it)
        value = km.value.value()
        if value & ~mask:
            raise StfValueError(f"{what}: value {value:#x} has bits outside its digits")
        if value >> width:
            raise StfValueError(f"{what}: {km.value} does not fit in {width} bits")
        mask &= full
        if mask == 0:
            return None
        fm.ternary.value = encode(value, width, what)
        fm.ternary.mask = encode(mask, width, what)
        return fm
    if mt == MT.LPM:
        value = km.value.value()
        if km.prefix_len is not None:
            plen = km.prefix_len
        elif km.value.radix_bits:
            plen = sum(1 for ch in km.value.digits if ch != "*") * km.value.radix_bits
        else:
            plen = width
        if value >> width:
            raise StfValueError(f"{what}: {km.value} does not fit in {width} bits")
        plen = min(plen, width)
        if plen == 0:
            return None
        # BMv2 matches the top `plen` bits of the field-wide value; P4Runtime wants the bits
        # past the prefix zero, so they are masked off (the match is the same).
        value &= ((1 << plen) - 1) << (width - plen)
        fm.lpm.value = encode(value, width, what)
        fm.lpm.prefix_len = plen
        return fm
    if mt == MT.RANGE:
        v = _plain(km.value, width, what)
        fm.range.low = v
        fm.range.high = v
        return fm
    if mt == MT.OPTIONAL:
        fm.optional.value = _plain(km.value, width, what)
        return fm
    raise Unsupported(f"{what}: match kind {mf.match_type} {mf.other_match_type!r}")


def _needs_priority(table: Any) -> bool:
    return any(mf.match_type in (MT.TERNARY, MT.RANGE, MT.OPTIONAL) for mf in table.match_fields)


def _action(schema: Schema, table: Any, call: ActionCall) -> Any:
    act = schema.action(table, call.name)
    given = dict(call.args)
    params = {p.name: p for p in act.params}
    for name in given:
        if name not in params:
            raise StfValueError(f"action '{act.preamble.name}' has no parameter '{name}' "
                                f"(has: {', '.join(params) or 'none'})")
    out = p4runtime_pb2.Action(action_id=act.preamble.id)
    for p in act.params:
        if p.name not in given:
            raise StfValueError(f"action '{act.preamble.name}': parameter '{p.name}' not given")
        out.params.add(param_id=p.id, value=_plain(given[p.name], p.bitwidth,
                                                   f"parameter '{p.name}'"))
    return out


def table_entry(schema: Schema, cmd: Add) -> Any:
    """The TableEntry an `add` means (not yet wrapped in an Update)."""
    table = schema.table(cmd.table)
    te = p4runtime_pb2.TableEntry(table_id=table.preamble.id)
    given: dict[int, KeyMatch] = {}
    for km in cmd.keys:
        mf = schema.match_field(table, km.name)
        if mf.id in given:
            raise StfValueError(f"key '{mf.name}' given twice")
        given[mf.id] = km
    for mf in table.match_fields:
        found = given.get(mf.id)
        if found is None and mf.match_type != MT.EXACT:
            continue                                      # wildcard
        fm = _field_match(mf, found or KeyMatch(mf.name, Number("0")))  # BMv2's driver: exact 0
        if fm is not None:
            te.match.append(fm)
    if _needs_priority(table):
        te.priority = (cmd.priority if cmd.priority is not None else 0) + 1
    te.action.action.CopyFrom(_action(schema, table, cmd.action))
    return te


def default_entry(schema: Schema, cmd: SetDefault) -> Any:
    table = schema.table(cmd.table)
    te = p4runtime_pb2.TableEntry(table_id=table.preamble.id, is_default_action=True)
    te.action.action.CopyFrom(_action(schema, table, cmd.action))
    return te


def _update(kind: int, **entity: Any) -> Any:
    return Update(type=kind, entity=p4runtime_pb2.Entity(**entity))


def counter_write(schema: Schema, cmd: CounterWrite) -> Any:
    c = schema.counter(cmd.counter)
    entry = p4runtime_pb2.CounterEntry(counter_id=c.preamble.id)
    entry.index.index = cmd.index
    entry.data.packet_count = cmd.packets
    entry.data.byte_count = cmd.bytes
    return _update(Update.MODIFY, counter_entry=entry)


def register_write(schema: Schema, cmd: RegisterWrite) -> Any:
    r = schema.register(cmd.register)
    entry = p4runtime_pb2.RegisterEntry(register_id=r.preamble.id)
    entry.index.index = cmd.index
    width = r.type_spec.bitstring.bit.bitwidth
    if not width:
        raise Unsupported(f"register '{r.preamble.name}': only bit<W> cells can be written")
    entry.data.bitstring = encode(cmd.value, width, f"register '{r.preamble.name}'")
    return _update(Update.MODIFY, register_entry=entry)


def register_reset(schema: Schema, cmd: RegisterReset) -> list[Any]:
    """Every cell to 0, one MODIFY per cell (a wildcard write is not in PI)."""
    r = schema.register(cmd.register)
    out = []
    for i in range(r.size):
        entry = p4runtime_pb2.RegisterEntry(register_id=r.preamble.id)
        entry.index.index = i
        entry.data.bitstring = b"\x00"
        out.append(_update(Update.MODIFY, register_entry=entry))
    return out


def meter_rates(schema: Schema, cmd: MeterSetRates) -> list[Any]:
    m = schema.meter(cmd.meter)
    if len(cmd.rates) != 2:
        raise Unsupported(f"meter '{m.preamble.name}': {len(cmd.rates)} rate pairs "
                          f"(a v1model meter has two: committed and peak)")
    (cir, cburst), (pir, pburst) = cmd.rates
    cfg = p4runtime_pb2.MeterConfig(cir=round(cir * 1e6), cburst=cburst, pir=round(pir * 1e6),
                                    pburst=pburst)
    indices = [cmd.index] if cmd.index is not None else list(range(m.size))
    out = []
    for i in indices:
        entry = p4runtime_pb2.MeterEntry(meter_id=m.preamble.id)
        entry.index.index = i
        entry.config.CopyFrom(cfg)
        out.append(_update(Update.MODIFY, meter_entry=entry))
    return out


@dataclass
class Replication:
    """BMv2's multicast and mirroring state as the STF commands build it, turned into the
    P4Runtime PRE entries that express the same replication."""
    nodes: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)   # handle -> (rid, ports)
    groups: dict[int, list[int]] = field(default_factory=dict)              # mgid -> handles
    written: set[int] = field(default_factory=set)                          # groups on the switch
    sessions: dict[int, tuple[str, int]] = field(default_factory=dict)      # sid -> (port|mc, n)

    def create_group(self, mgid: int) -> list[Any]:
        if mgid in self.groups:
            raise StfValueError(f"multicast group {mgid} created twice")
        self.groups[mgid] = []
        return []             # written once it has members: P4Runtime groups hold replicas

    def create_node(self, rid: int, ports: tuple[int, ...]) -> list[Any]:
        self.nodes.append((rid, ports))
        return []

    def update_node(self, handle: int, ports: tuple[int, ...]) -> list[Any]:
        if not 0 <= handle < len(self.nodes):
            raise StfValueError(f"no multicast node {handle}")
        self.nodes[handle] = (self.nodes[handle][0], ports)
        return [u for g, hs in self.groups.items() if handle in hs for u in self._group(g)]

    def associate(self, mgid: int, handle: int) -> list[Any]:
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

    def _group(self, mgid: int) -> list[Any]:
        entry = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=mgid)
        for port, rid in self.replicas(mgid):
            entry.replicas.add(egress_port=port, instance=rid)
        kind = Update.MODIFY if mgid in self.written else Update.INSERT
        self.written.add(mgid)
        pre = p4runtime_pb2.PacketReplicationEngineEntry(multicast_group_entry=entry)
        ups = [_update(kind, packet_replication_engine_entry=pre)]
        for sid, (how, n) in self.sessions.items():
            if how == "mc" and n == mgid:
                ups += self._session(sid, how, n)
        return ups

    def mirror(self, sid: int, how: str, n: int) -> list[Any]:
        return self._session(sid, how, n)

    def _session(self, sid: int, how: str, n: int) -> list[Any]:
        entry = p4runtime_pb2.CloneSessionEntry(session_id=sid)
        if how == "port":
            entry.replicas.add(egress_port=n, instance=0)
        else:
            for port, rid in self.replicas(n):
                entry.replicas.add(egress_port=port, instance=rid)
        kind = Update.MODIFY if sid in self.sessions else Update.INSERT
        self.sessions[sid] = (how, n)
        pre = p4runtime_pb2.PacketReplicationEngineEntry(clone_session_entry=entry)
        return [_update(kind, packet_replication_engine_entry=pre)]

    def unmirror(self, sid: int) -> list[Any]:
        if sid not in self.sessions:
            raise StfValueError(f"mirroring session {sid} does not exist")
        del self.sessions[sid]
        entry = p4runtime_pb2.CloneSessionEntry(session_id=sid)
        pre = p4runtime_pb2.PacketReplicationEngineEntry(clone_session_entry=entry)
        return [_update(Update.DELETE, packet_replication_engine_entry=pre)]
