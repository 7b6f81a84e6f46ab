"""Write and Read of the non-table entities as pure functions on a `Context`:
indirect and direct counters (§9.2-9.3), indirect and direct meters (§9.4-9.5), registers
(§9.7; an extra over PI, which answers UNIMPLEMENTED) and the packet replication engine
(§9.6: multicast groups and clone sessions).

Readers are generators of `ReadStep`s (context.py): each `next` runs under device.lock and
only copies data-plane values; the step it yields builds the `p4.v1.Entity` messages after the
lock is released, because encoding (pure-Python protobuf) costs ~50x more than reading and a
wildcard register read of netsum.p4 has ~300k cells.

Counters, meters and registers always exist: only MODIFY is allowed on them (INSERT/DELETE
are INVALID_ARGUMENT); an index past the array is OUT_OF_RANGE.  Wildcard reads: id 0 = every
object of that kind, an unset index = every cell.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

from p4.v1 import p4runtime_pb2

from netsum.switch.entries import CounterValue, Replica
from netsum.switch.errors import Code
from netsum.switch.p4rt.codec import decode_uint, encode_uint
from netsum.switch.p4rt.context import Context, ReadStep
from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.p4rt import wire
from netsum.schema import NameIndex
from netsum.switch.p4rt.schema import ResourceInfo
from netsum.switch.p4rt.tables import (binding, decode_meter_config, encode_key, encode_meter_config,
                                find_entry)

__all__ = ["write_counter", "read_counters", "write_direct_counter", "read_direct_counters",
           "write_meter", "read_meters", "write_direct_meter", "read_direct_meters",
           "write_register", "read_registers", "write_pre", "read_pre",
           "MAX_GROUP_ID", "CLONE_SESSION_MAX"]

Update = p4runtime_pb2.Update
Entity = p4runtime_pb2.Entity
#: PI's PRE limits: multicast group and clone session ids are 1..32767 (clone sessions use
#: multicast groups 32768 + id inside bmv2).
MAX_GROUP_ID = 32767
CLONE_SESSION_MAX = 32767
PORT_BITS = 32
#: Cells copied per device.lock hold during array reads.
READ_CHUNK_CELLS = 1024


def _invalid(message: str) -> P4RTError:
    return P4RTError(Code.INVALID_ARGUMENT, message)


def _modify_only(kind: int, what: str) -> None:
    if kind != Update.MODIFY:
        raise _invalid(f"{what}: only MODIFY is allowed (got {Update.Type.Name(kind)})")


def _array(ctx: Context, kind: str, info: ResourceInfo) -> Any:
    """The data-plane array a P4Info counter/meter/register names.  PI checks nothing at
    SetForwardingPipelineConfig; bmv2 refuses an access to an array its JSON lacks, which PI
    reports as UNKNOWN."""
    arr = getattr(ctx.pipeline, kind).get(info.name)
    if arr is None:
        raise P4RTError(Code.UNKNOWN, f"Error when accessing {kind[:-1]} '{info.name}' in "
                        "target: it is not in the loaded BMv2 JSON")
    return arr


def _index(info: ResourceInfo, index: int, what: str) -> int:
    if index < 0 or index >= info.size:
        raise P4RTError(Code.OUT_OF_RANGE,
                        f"{what} '{info.name}': index {index} out of range 0..{info.size - 1}")
    return index


def _cells(info: ResourceInfo, msg: Any, what: str) -> Iterable[int]:
    if msg.HasField("index"):
        return (_index(info, msg.index.index, what),)
    return range(info.size)


def _all_or_one(index: NameIndex[ResourceInfo], ident: int, lookup: Any) -> list[ResourceInfo]:
    return [lookup(ident)] if ident else sorted(index.values(), key=lambda r: r.id)


# ---------------------------------------------------------------- counters

def _fill_counter_data(out: p4runtime_pb2.CounterData, value: CounterValue) -> None:
    out.packet_count = value.packets
    out.byte_count = value.bytes


def write_counter(ctx: Context, kind: int, ce: p4runtime_pb2.CounterEntry) -> None:
    info = ctx.schema.counter(ce.counter_id)
    _modify_only(kind, f"counter '{info.name}'")
    if not ce.HasField("index"):
        raise _invalid(f"counter '{info.name}': a write needs an index")
    idx = _index(info, ce.index.index, "counter")
    _array(ctx, "counters", info).write(idx, CounterValue(ce.data.packet_count,
                                                             ce.data.byte_count))


def read_counters(ctx: Context, ce: p4runtime_pb2.CounterEntry) -> Iterator[ReadStep]:
    for info in _all_or_one(ctx.schema.counters, ce.counter_id, ctx.schema.counter):
        arr = _array(ctx, "counters", info)
        if ce.HasField("index"):
            i = _index(info, ce.index.index, "counter")
            v = arr.read(i)
            yield partial(wire.counter_entities, info.id, [(i, v.packets, v.bytes)])
            continue
        for start in range(0, info.size, READ_CHUNK_CELLS):
            # Copied under device.lock (this generator's caller holds it), encoded after.
            stop = min(start + READ_CHUNK_CELLS, info.size, arr.size)
            packets, nbytes = arr.read_range(start, stop)
            yield partial(wire.counter_entities, info.id,
                          zip(range(start, stop), packets, nbytes))


def write_direct_counter(ctx: Context, kind: int, dce: p4runtime_pb2.DirectCounterEntry) -> None:
    _modify_only(kind, "direct counter")
    table, entry = find_entry(ctx, dce.table_entry)
    if not table.direct_counter_id:
        raise _invalid(f"table '{table.name}' has no direct counter")
    binding(ctx, table).table.write_counter(
        entry.key, entry.priority, CounterValue(dce.data.packet_count, dce.data.byte_count))


def read_direct_counters(ctx: Context, dce: p4runtime_pb2.DirectCounterEntry
                         ) -> Iterator[ReadStep]:
    def encode(table: Any, entry: Any) -> p4runtime_pb2.Entity:
        e = Entity()
        _fill_entry_id(ctx, e.direct_counter_entry.table_entry, table, entry)
        _fill_counter_data(e.direct_counter_entry.data, entry.counter)
        return e

    for table, entries in _direct_entries(ctx, dce.table_entry, "direct_counter_id"):
        yield partial(_encode_each, encode, table, entries)


# ---------------------------------------------------------------- meters

def write_meter(ctx: Context, kind: int, me: p4runtime_pb2.MeterEntry) -> None:
    info = ctx.schema.meter(me.meter_id)
    _modify_only(kind, f"meter '{info.name}'")
    if not me.HasField("index"):
        raise _invalid(f"meter '{info.name}': a write needs an index")
    idx = _index(info, me.index.index, "meter")
    config = (decode_meter_config(me.config, f"meter '{info.name}'")
              if me.HasField("config") else None)
    _array(ctx, "meters", info).set_config(idx, config)


def read_meters(ctx: Context, me: p4runtime_pb2.MeterEntry) -> Iterator[ReadStep]:
    def encode(info: ResourceInfo, i: int, config: Any) -> p4runtime_pb2.Entity:
        e = Entity()
        out = e.meter_entry
        out.meter_id = info.id
        out.index.index = i
        if config is not None:
            out.config.CopyFrom(encode_meter_config(config))
        return e

    for info in _all_or_one(ctx.schema.meters, me.meter_id, ctx.schema.meter):
        yield from _array_steps(info, _cells(info, me, "meter"),
                                _array(ctx, "meters", info).get_config, encode)


def write_direct_meter(ctx: Context, kind: int, dme: p4runtime_pb2.DirectMeterEntry) -> None:
    _modify_only(kind, "direct meter")
    table, entry = find_entry(ctx, dme.table_entry)
    if not table.direct_meter_id:
        raise _invalid(f"table '{table.name}' has no direct meter")
    config = (decode_meter_config(dme.config, f"direct meter of '{table.name}'")
              if dme.HasField("config") else None)
    binding(ctx, table).table.set_meter(entry.key, entry.priority, config)


def read_direct_meters(ctx: Context, dme: p4runtime_pb2.DirectMeterEntry
                       ) -> Iterator[ReadStep]:
    def encode(table: Any, entry: Any) -> p4runtime_pb2.Entity:
        e = Entity()
        _fill_entry_id(ctx, e.direct_meter_entry.table_entry, table, entry)
        if entry.meter is not None:
            e.direct_meter_entry.config.CopyFrom(encode_meter_config(entry.meter))
        return e

    for table, entries in _direct_entries(ctx, dme.table_entry, "direct_meter_id"):
        yield partial(_encode_each, encode, table, entries)


# ---------------------------------------------------------------- direct-resource helpers

def _array_steps(info: ResourceInfo, cells: Iterable[int], read: Callable[[int], Any],
                 encode: Callable[[ResourceInfo, int, Any], p4runtime_pb2.Entity]
                 ) -> Iterator[ReadStep]:
    """Read cells in chunks (under the caller's device.lock), encode each chunk outside it."""
    batch = list(cells)
    for start in range(0, len(batch), READ_CHUNK_CELLS):
        values = [(i, read(i)) for i in batch[start:start + READ_CHUNK_CELLS]]
        yield partial(_encode_cells, encode, info, values)


def _direct_entries(ctx: Context, te: p4runtime_pb2.TableEntry, attr: str
                    ) -> Iterator[tuple[Any, list[Any]]]:
    """(table, entries) per selected table; each `next` snapshots one table's entries."""
    if te.table_id == 0:
        tables = [t for t in sorted(ctx.schema.tables.values(), key=lambda t: t.id)
                  if getattr(t, attr)]
    else:
        tables = [ctx.schema.table(te.table_id)]
        if not getattr(tables[0], attr):
            raise _invalid(f"table '{tables[0].name}' has no "
                           f"{'direct counter' if attr == 'direct_counter_id' else 'direct meter'}")
    for table in tables:
        dp_table = binding(ctx, table).table
        if te.match:
            yield table, [find_entry(ctx, te)[1]]
        else:
            yield table, list(dp_table.entries()) if dp_table is not None else []


def _encode_cells(encode: Callable[[ResourceInfo, int, Any], p4runtime_pb2.Entity],
                  info: ResourceInfo, values: list[tuple[int, Any]]) -> list[p4runtime_pb2.Entity]:
    """The ReadStep body of an array read: runs after device.lock is released."""
    return [encode(info, i, v) for i, v in values]


def _encode_each(encode: Callable[[Any, Any], p4runtime_pb2.Entity], table: Any,
                 entries: list[Any]) -> list[p4runtime_pb2.Entity]:
    """The ReadStep body of a direct-resource read: runs after device.lock is released."""
    return [encode(table, en) for en in entries]


def _fill_entry_id(ctx: Context, out: p4runtime_pb2.TableEntry, table: Any, entry: Any) -> None:
    out.table_id = table.id
    out.priority = entry.priority
    out.match.extend(encode_key(table, entry.key, binding(ctx, table).fields))


# ---------------------------------------------------------------- registers

def write_register(ctx: Context, kind: int, re: p4runtime_pb2.RegisterEntry) -> None:
    info = ctx.schema.register(re.register_id)
    _modify_only(kind, f"register '{info.name}'")
    if not re.HasField("index"):
        raise _invalid(f"register '{info.name}': a write needs an index")
    idx = _index(info, re.index.index, "register")
    if re.data.WhichOneof("data") != "bitstring":
        raise _invalid(f"register '{info.name}': data must be a bitstring")
    value = decode_uint(re.data.bitstring, info.bitwidth, f"register '{info.name}'")
    _array(ctx, "registers", info).write(idx, value)


def read_registers(ctx: Context, re: p4runtime_pb2.RegisterEntry) -> Iterator[ReadStep]:
    for info in _all_or_one(ctx.schema.registers, re.register_id, ctx.schema.register):
        arr = _array(ctx, "registers", info)
        if re.HasField("index"):
            i = _index(info, re.index.index, "register")
            yield partial(wire.register_entities, info.id, [(i, arr.read(i))])
            continue
        for start in range(0, info.size, READ_CHUNK_CELLS):
            stop = min(start + READ_CHUNK_CELLS, info.size, arr.size)
            yield partial(wire.register_entities, info.id,
                          zip(range(start, stop), arr.read_range(start, stop)))


# ---------------------------------------------------------------- PRE

def _replicas(msgs: Iterable[p4runtime_pb2.Replica], what: str) -> tuple[Replica, ...]:
    out: list[Replica] = []
    seen: set[tuple[int, int]] = set()
    for r in msgs:
        kind = r.WhichOneof("port_kind")
        if kind == "port":
            port = decode_uint(r.port, PORT_BITS, f"{what} replica port")
        elif kind == "egress_port":
            port = r.egress_port
        else:
            raise _invalid(f"{what}: replica without a port")
        if r.instance >= 1 << 16:
            raise _invalid(f"{what}: replica instance {r.instance} does not fit egress_rid (16 bits)")
        if (port, r.instance) in seen:
            raise _invalid(f"{what}: duplicate replica (port {port}, instance {r.instance})")
        seen.add((port, r.instance))
        out.append(Replica(port, r.instance))
    return tuple(out)


def _group_id(ident: int, what: str) -> int:
    if ident == 0:
        raise _invalid(f"{what} id 0 is reserved")
    if ident > MAX_GROUP_ID:
        raise P4RTError(Code.OUT_OF_RANGE, f"{what} id {ident} out of range 1..{MAX_GROUP_ID}")
    return ident


def write_pre(ctx: Context, kind: int, pre_entry: p4runtime_pb2.PacketReplicationEngineEntry
              ) -> None:
    pre = ctx.pipeline.pre
    which = pre_entry.WhichOneof("type")
    if which == "multicast_group_entry":
        mg = pre_entry.multicast_group_entry
        mgid = _group_id(mg.multicast_group_id, "multicast group")
        exists = mgid in _as_dict(pre.mc_groups())
        if kind == Update.DELETE:
            if not exists:
                raise P4RTError(Code.NOT_FOUND, f"multicast group {mgid} does not exist")
            pre.mc_group_delete(mgid)
            return
        replicas = _replicas(mg.replicas, f"multicast group {mgid}")
        if kind == Update.INSERT:
            if exists:
                raise P4RTError(Code.ALREADY_EXISTS, f"multicast group {mgid} already exists")
            pre.mc_group_insert(mgid, replicas)
        else:
            if not exists:
                raise P4RTError(Code.NOT_FOUND, f"multicast group {mgid} does not exist")
            pre.mc_group_modify(mgid, replicas)
    elif which == "clone_session_entry":
        cs = pre_entry.clone_session_entry
        sid = _group_id(cs.session_id, "clone session")
        exists = sid in _as_dict(pre.clone_sessions())
        if kind == Update.DELETE:
            if not exists:
                raise P4RTError(Code.NOT_FOUND, f"clone session {sid} does not exist")
            pre.clone_session_delete(sid)
            return
        if cs.class_of_service:
            raise P4RTError(Code.UNIMPLEMENTED, "clone session class_of_service is not supported")
        if cs.packet_length_bytes < 0:
            raise _invalid(f"clone session {sid}: negative packet_length_bytes")
        replicas = _replicas(cs.replicas, f"clone session {sid}")
        if kind == Update.INSERT:
            if exists:
                raise P4RTError(Code.ALREADY_EXISTS, f"clone session {sid} already exists")
            pre.clone_session_insert(sid, replicas, cs.packet_length_bytes)
        else:
            if not exists:
                raise P4RTError(Code.NOT_FOUND, f"clone session {sid} does not exist")
            pre.clone_session_modify(sid, replicas, cs.packet_length_bytes)
    else:
        raise _invalid("PacketReplicationEngineEntry without a multicast group or clone session")


def read_pre(ctx: Context, pre_entry: p4runtime_pb2.PacketReplicationEngineEntry
             ) -> Iterator[ReadStep]:
    pre = ctx.pipeline.pre
    which = pre_entry.WhichOneof("type")
    if which == "multicast_group_entry":
        want = pre_entry.multicast_group_entry.multicast_group_id
        groups = sorted(_as_dict(pre.mc_groups()).items())
        yield lambda: [_group_entity(mgid, replicas) for mgid, replicas in groups
                       if not want or mgid == want]
    elif which == "clone_session_entry":
        want = pre_entry.clone_session_entry.session_id
        sessions = sorted(_as_dict(pre.clone_sessions()).items())
        yield lambda: [_session_entity(sid, replicas, length)
                       for sid, (replicas, length) in sessions if not want or sid == want]
    else:
        raise _invalid("PacketReplicationEngineEntry read needs a multicast group or clone session")


def _group_entity(mgid: int, replicas: Iterable[Replica]) -> p4runtime_pb2.Entity:
    e = Entity()
    out = e.packet_replication_engine_entry.multicast_group_entry
    out.multicast_group_id = mgid
    _encode_replicas(out.replicas, replicas)
    return e


def _session_entity(sid: int, replicas: Iterable[Replica], length: int) -> p4runtime_pb2.Entity:
    e = Entity()
    out = e.packet_replication_engine_entry.clone_session_entry
    out.session_id = sid
    out.packet_length_bytes = length
    _encode_replicas(out.replicas, replicas)
    return e


def _encode_replicas(field: Any, replicas: Iterable[Replica]) -> None:
    for r in replicas:
        # `port_kind` is a oneof: reads answer with the deprecated `egress_port`, which every
        # client knows (p4runtime-shell 0.0.6 reads only that one), as PI does.
        field.add(egress_port=r.port, instance=r.rid)


def _as_dict(value: Any) -> dict[int, Any]:
    """The PRE returns its groups/sessions as a mapping id -> data (or pairs of those)."""
    return dict(value.items()) if hasattr(value, "items") else dict(value)


# ---------------------------------------------------------------- action profiles
