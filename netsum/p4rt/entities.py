"""P4Runtime table entries as frozen dataclasses, encoded to and decoded from protobuf with a
schema; `update` wraps any entity of the library in a Write update.

The schema is an argument of `encode`/`decode`, never a global, so entities for several
programs/switches can coexist.  Names are full control-plane names after encoding; decoding
gives full names back.  Match fields that are don't-care are omitted on the wire (spec §9.1.1)
and come back as absent: an entry's `match` holds only the fields that constrain it.  The other
entities: `pre` (multicast groups, clone sessions), `cells` (counters, meters, registers).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Union

from p4.v1 import p4runtime_pb2

from netsum.match import Exact, Lpm, Match, Optional, Range, Ternary
from netsum.p4rt import values
from netsum.p4rt.errors import LiteralError, SchemaLookupError
from netsum.p4rt.pre import CloneSession, MulticastGroup
from netsum.p4rt.schema import Schema, TableInfo

__all__ = ["TableEntry", "Entity", "update", "table_wildcard", "parse_table_entry",
           "INSERT", "MODIFY", "DELETE"]

INSERT = p4runtime_pb2.Update.INSERT
MODIFY = p4runtime_pb2.Update.MODIFY
DELETE = p4runtime_pb2.Update.DELETE

_pb = p4runtime_pb2


@dataclass(frozen=True, slots=True)
class TableEntry:
    table: str                                   # full name
    match: tuple[tuple[str, Match], ...] = ()    # (key field name, match), don't-cares omitted
    action: str = ""                             # full action name; "" only in a key-only entry
    params: tuple[int, ...] = ()                 # one per action parameter, in P4Info order
    priority: int = 0
    is_default: bool = False
    # Read-only information from the switch; not part of an entry's identity.
    counter: tuple[int, int] | None = field(default=None, compare=False)
    is_const: bool = field(default=False, compare=False)
    #: The controller's opaque cookie (spec §9.1 `metadata`): kept by the switch, read back.
    metadata: bytes = field(default=b"", compare=False)

    def identity(self) -> tuple[object, ...]:
        """What names the entry on the switch (spec §9.1: match + priority)."""
        return (self.table, self.is_default, self.match, self.priority)

    def encode(self, schema: Schema) -> p4runtime_pb2.Entity:
        t = schema.table(self.table)
        ent = _pb.Entity()
        te = ent.table_entry
        te.table_id = t.id
        te.priority = self.priority
        te.is_default_action = self.is_default
        if self.metadata:
            te.metadata = self.metadata
        for name, m in self.match:
            kf = schema.key_field(t, name)
            if values.is_dont_care(m, kf.bitwidth):
                continue
            fm = te.match.add()
            fm.field_id = kf.id
            try:
                _encode_match(fm, m, kf.bitwidth)
            except LiteralError as exc:
                raise LiteralError(f"table {t.alias!r} key field {kf.name!r}: "
                                   f"{exc.message}") from None
        if self.action:
            a = schema.table_action(t, self.action)
            if len(self.params) != len(a.params):
                raise LiteralError(
                    f"action {a.alias!r} takes {len(a.params)} parameter(s) "
                    f"({', '.join(p.name for p in a.params) or 'none'}), got {len(self.params)}")
            te.action.action.action_id = a.id
            for p, v in zip(a.params, self.params):
                ap = te.action.action.params.add()
                ap.param_id = p.id
                try:
                    ap.value = values.encode(v, p.bitwidth)
                except LiteralError as exc:
                    raise LiteralError(f"action {a.alias!r} parameter {p.name!r}: "
                                       f"{exc.message}") from None
        return ent

    @classmethod
    def decode(cls, ent: p4runtime_pb2.Entity, schema: Schema) -> "TableEntry":
        te = ent.table_entry
        t = schema.tables.get_id(te.table_id)
        by_id = {f.id: f for f in t.match_fields}
        found: list[tuple[int, str, Match]] = []
        for fm in te.match:
            kf = by_id.get(fm.field_id)
            if kf is None:
                raise SchemaLookupError(f"table {t.alias!r} has no key field id {fm.field_id}")
            found.append((kf.id, kf.name, _decode_match(fm, kf.bitwidth)))
        # Key order, whatever order the server sent the fields in, so an entry read back
        # equals the one that was written.
        match = tuple((name, m) for _, name, m in sorted(found, key=lambda x: x[0]))
        action: str = ""
        params: tuple[int, ...] = ()
        if te.action.HasField("action"):
            a = schema.actions.get_id(te.action.action.action_id)
            pw = {p.id: p.bitwidth for p in a.params}
            got = {p.param_id: values.decode(p.value, pw.get(p.param_id, 8 * len(p.value)))
                   for p in te.action.action.params}
            action, params = a.name, tuple(got.get(p.id, 0) for p in a.params)
        counter = None
        if te.HasField("counter_data"):
            counter = (te.counter_data.packet_count, te.counter_data.byte_count)
        return cls(t.name, tuple(match), action, params, te.priority, te.is_default_action,
                   counter, te.is_const, te.metadata)


def _encode_match(fm: p4runtime_pb2.FieldMatch, m: Match, width: int) -> None:
    if isinstance(m, Exact):
        fm.exact.value = values.encode(m.value, width)
    elif isinstance(m, Lpm):
        fm.lpm.value = values.encode(m.value, width)
        fm.lpm.prefix_len = m.prefix_len
    elif isinstance(m, Ternary):
        fm.ternary.value = values.encode(m.value, width)
        fm.ternary.mask = values.encode(m.mask, width)
    elif isinstance(m, Range):
        fm.range.low = values.encode(m.low, width)
        fm.range.high = values.encode(m.high, width)
    elif isinstance(m, Optional) and m.value is not None:
        fm.optional.value = values.encode(m.value, width)


def _decode_match(fm: p4runtime_pb2.FieldMatch, width: int) -> Match:
    kind = fm.WhichOneof("field_match_type")
    if kind == "exact":
        return Exact(values.decode(fm.exact.value, width))
    if kind == "lpm":
        return Lpm(values.decode(fm.lpm.value, width), fm.lpm.prefix_len)
    if kind == "ternary":
        return Ternary(values.decode(fm.ternary.value, width),
                       values.decode(fm.ternary.mask, width))
    if kind == "range":
        return Range(values.decode(fm.range.low, width), values.decode(fm.range.high, width))
    if kind == "optional":
        return Optional(values.decode(fm.optional.value, width))
    raise LiteralError(f"unsupported field match {kind!r}")


class _Encodable(Protocol):
    def encode(self, schema: Schema) -> p4runtime_pb2.Entity: ...


#: Anything `update` wraps: a TableEntry, a `pre` entity or a `cells` cell.
Entity = Union[TableEntry, MulticastGroup, CloneSession, _Encodable]


def update(kind: int, entity: Entity, schema: Schema | None = None) -> p4runtime_pb2.Update:
    """An Update of `kind` (INSERT/MODIFY/DELETE) for `entity`.  Multicast groups and clone
    sessions are not described by the P4Info, so their updates need no schema."""
    u = _pb.Update(type=kind)
    if isinstance(entity, (MulticastGroup, CloneSession)):
        u.entity.CopyFrom(entity.encode())
    elif schema is None:
        raise TypeError(f"an update of a {type(entity).__name__} needs the P4Info schema")
    else:
        u.entity.CopyFrom(entity.encode(schema))
    return u


def table_wildcard(t: TableInfo | None, with_counters: bool = False) -> p4runtime_pb2.Entity:
    """Read request for every entry of `t` (every table when None); spec §11.1."""
    ent = _pb.Entity()
    ent.table_entry.table_id = t.id if t is not None else 0
    if with_counters and t is not None and t.direct_counter_id:
        ent.table_entry.counter_data.SetInParent()
    return ent


def parse_table_entry(schema: Schema, table: str, action: str | None, keys: list[str],
                      params: list[str], priority: str | None = None) -> TableEntry:
    """A TableEntry from simple_switch_CLI-style words (`table_add T A k1 k2 => p1 p2 [prio]`).
    `action` None builds a key-only entry (for delete)."""
    t = schema.table(table)
    if len(keys) != len(t.match_fields):
        names = ", ".join(f"{f.name}:{f.match_type.label}" for f in t.match_fields) or "none"
        raise LiteralError(f"table {t.alias!r} needs {len(t.match_fields)} key value(s) ({names}), "
                           f"got {len(keys)}")
    parsed = [(f, values.parse_match(k, f.match_type, f.bitwidth, f.name)) for f, k in zip(t.match_fields, keys)]
    # Don't-care fields are left out, as the switch will report the entry (spec §9.1.1), so an
    # entry built here equals the one read back.
    match = tuple((f.name, m) for f, m in parsed if not values.is_dont_care(m, f.bitwidth))
    prio = 0
    if t.needs_priority:
        if priority is None:
            raise LiteralError(f"table {t.alias!r} has ternary/range/optional keys: give a "
                               "priority (> 0) after the action parameters")
        prio = values.parse_int(priority, 31, "priority")
        if prio == 0:
            raise LiteralError("priority must be > 0 (P4Runtime: larger wins)")
    elif priority is not None:
        raise LiteralError(f"table {t.alias!r} has only exact/lpm keys and takes no priority "
                           f"(extra value {priority!r})")
    if action is None:
        return TableEntry(t.name, match, "", (), prio)
    a = schema.table_action(t, action)
    if len(params) != len(a.params):
        raise LiteralError(f"action {a.alias!r} takes {len(a.params)} parameter(s) "
                           f"({', '.join(p.name for p in a.params) or 'none'}), got {len(params)}")
    pv = tuple(values.parse_int(v, p.bitwidth, f"parameter {p.name!r}")
               for p, v in zip(a.params, params))
    return TableEntry(t.name, match, a.name, pv, prio)
