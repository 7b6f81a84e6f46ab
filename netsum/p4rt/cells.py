"""Cells of indexed and direct resources (spec §9.2-§9.4, §9.6): counters, direct counters,
meters and registers, as frozen dataclasses encoded with a schema.

A cell names its resource by control-plane name; `encode` resolves it in the schema, `decode`
gives the full name back.  Register cells hold bit<W> values (spec §8.4 bytestrings); a register
of int<W> cells is refused rather than guessed at.
"""
from __future__ import annotations

from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from netsum.p4rt import values
from netsum.p4rt.entities import TableEntry
from netsum.p4rt.errors import LiteralError
from netsum.p4rt.schema import ResourceInfo, Schema

__all__ = ["CounterCell", "DirectCounterCell", "MeterCell", "RegisterCell", "counter_wildcard",
           "register_wildcard"]

_pb = p4runtime_pb2


@dataclass(frozen=True, slots=True)
class CounterCell:
    counter: str
    index: int
    packets: int = 0
    bytes: int = 0

    def identity(self) -> tuple[object, ...]:
        return ("counter", self.counter, self.index)

    def encode(self, schema: Schema) -> p4runtime_pb2.Entity:
        c = schema.counter(self.counter)
        ent = _pb.Entity()
        ent.counter_entry.counter_id = c.id
        ent.counter_entry.index.index = self.index
        ent.counter_entry.data.packet_count = self.packets
        ent.counter_entry.data.byte_count = self.bytes
        return ent

    @classmethod
    def decode(cls, ent: p4runtime_pb2.Entity, schema: Schema) -> "CounterCell":
        ce = ent.counter_entry
        c = schema.counters.get_id(ce.counter_id)
        return cls(c.name, ce.index.index, ce.data.packet_count, ce.data.byte_count)


@dataclass(frozen=True, slots=True)
class DirectCounterCell:
    """The direct counter cell of one table entry (the entry's key names it).  Encoded without
    counts it is a read request for that cell."""
    entry: TableEntry
    packets: int = 0
    bytes: int = 0
    with_data: bool = False

    def identity(self) -> tuple[object, ...]:
        return ("direct counter", *self.entry.identity())

    def encode(self, schema: Schema) -> p4runtime_pb2.Entity:
        ent = _pb.Entity()
        dc = ent.direct_counter_entry
        dc.table_entry.CopyFrom(self.entry.encode(schema).table_entry)
        if self.with_data or self.packets or self.bytes:
            dc.data.packet_count = self.packets
            dc.data.byte_count = self.bytes
        return ent

    @classmethod
    def decode(cls, ent: p4runtime_pb2.Entity, schema: Schema) -> "DirectCounterCell":
        dc = ent.direct_counter_entry
        entry = TableEntry.decode(_pb.Entity(table_entry=dc.table_entry), schema)
        return cls(entry, dc.data.packet_count, dc.data.byte_count, dc.HasField("data"))


@dataclass(frozen=True, slots=True)
class MeterCell:
    """One cell's two-rate three-colour configuration (rates per second, bursts in the
    meter's unit); a cell without a configuration (`config` None) marks every packet green."""
    meter: str
    index: int
    config: tuple[int, int, int, int] | None = None      # cir, cburst, pir, pburst

    def identity(self) -> tuple[object, ...]:
        return ("meter", self.meter, self.index)

    def encode(self, schema: Schema) -> p4runtime_pb2.Entity:
        m = schema.meter(self.meter)
        ent = _pb.Entity()
        ent.meter_entry.meter_id = m.id
        ent.meter_entry.index.index = self.index
        if self.config is not None:
            cir, cburst, pir, pburst = self.config
            ent.meter_entry.config.CopyFrom(_pb.MeterConfig(cir=cir, cburst=cburst, pir=pir,
                                                            pburst=pburst))
        return ent

    @classmethod
    def decode(cls, ent: p4runtime_pb2.Entity, schema: Schema) -> "MeterCell":
        me = ent.meter_entry
        m = schema.meters.get_id(me.meter_id)
        cfg = me.config
        config = (cfg.cir, cfg.cburst, cfg.pir, cfg.pburst) if me.HasField("config") else None
        return cls(m.name, me.index.index, config)


@dataclass(frozen=True, slots=True)
class RegisterCell:
    register: str
    index: int
    value: int = 0

    def identity(self) -> tuple[object, ...]:
        return ("register", self.register, self.index)

    def encode(self, schema: Schema) -> p4runtime_pb2.Entity:
        r = schema.register(self.register)
        if r.signed or not r.bitwidth:
            raise LiteralError(f"register {r.alias!r}: only bit<W> cells can be written")
        ent = _pb.Entity()
        ent.register_entry.register_id = r.id
        ent.register_entry.index.index = self.index
        try:
            ent.register_entry.data.bitstring = values.encode(self.value, r.bitwidth)
        except LiteralError as exc:
            raise LiteralError(f"register {r.alias!r} index {self.index}: {exc.message}") \
                from None
        return ent

    @classmethod
    def decode(cls, ent: p4runtime_pb2.Entity, schema: Schema) -> "RegisterCell":
        re_ = ent.register_entry
        r = schema.registers.get_id(re_.register_id)
        data = re_.data.bitstring
        return cls(r.name, re_.index.index, values.decode(data, r.bitwidth) if data else 0)


def _cell_read(kind: str, r: ResourceInfo, index: int | None) -> p4runtime_pb2.Entity:
    """A read request for one cell of a counter or register (`kind`), or all of them (index
    None); an index out of range is refused here with the array's size."""
    if index is not None and not 0 <= index < r.size:
        raise LiteralError(f"{kind} {r.alias!r} index {index} is out of range 0..{r.size - 1}")
    ent = _pb.Entity()
    entry = getattr(ent, f"{kind}_entry")
    setattr(entry, f"{kind}_id", r.id)
    if index is not None:
        entry.index.index = index
    return ent


def counter_wildcard(schema: Schema, name: str, index: int | None = None) -> p4runtime_pb2.Entity:
    """Read request for one cell of a counter, or all of them (index None)."""
    return _cell_read("counter", schema.counter(name), index)


def register_wildcard(schema: Schema, name: str, index: int | None = None
                      ) -> p4runtime_pb2.Entity:
    """Read request for one cell of a register, or all of them (index None)."""
    return _cell_read("register", schema.register(name), index)
