"""P4Info index: ids <-> names, widths and match kinds, built once per committed pipeline.

Every P4Runtime request names objects by P4Info id; the data plane (`switch.device`) knows them
by their JSON name, which bmv2's PI layer requires to equal the P4Info name.  `Schema` is the only
place that translates, and it answers unknown ids with INVALID_ARGUMENT naming the id kind, as
PI's device_mgr does ("Invalid table id", ...).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from p4.config.v1 import p4info_pb2

from switch.errors import Code
from switch.p4rt.errors import P4RTError

__all__ = ["Schema", "TableInfo", "MatchFieldInfo", "ParamInfo", "ActionInfo", "ResourceInfo",
           "PacketMetadataInfo", "MatchKind", "EXACT", "LPM", "TERNARY", "RANGE", "OPTIONAL"]

MatchKind = p4info_pb2.MatchField.MatchType
# Plain ints: the enum wrapper's attribute lookup is slow on the per-update path.
EXACT, LPM, TERNARY, RANGE, OPTIONAL = (int(MatchKind.Value(n)) for n in
                                        ("EXACT", "LPM", "TERNARY", "RANGE", "OPTIONAL"))
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    match_type: int        # p4info MatchField.MatchType value


@dataclass(frozen=True, slots=True)
class ParamInfo:
    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True, slots=True)
class ActionInfo:
    id: int
    name: str
    params: tuple[ParamInfo, ...]

    def param_index(self) -> dict[int, int]:
        return {p.id: i for i, p in enumerate(self.params)}


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    name: str
    match_fields: tuple[MatchFieldInfo, ...]
    action_ids: frozenset[int]
    table_only_action_ids: frozenset[int]
    default_only_action_ids: frozenset[int]
    const_default_action_id: int
    is_const: bool
    size: int
    direct_counter_id: int      # 0 when none
    direct_meter_id: int        # 0 when none
    #: P4Runtime §9.1: priority is required iff a field is ternary, range or optional.
    needs_priority: bool


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """Counter, meter or register (direct or indirect)."""
    id: int
    name: str
    size: int                 # 0 for direct resources
    bitwidth: int = 0         # registers only
    direct_table_id: int = 0  # direct resources only
    unit: int = 0             # counter/meter unit enum value


@dataclass(frozen=True, slots=True)
class PacketMetadataInfo:
    id: int
    name: str
    bitwidth: int


class Schema:
    """Read-only lookup tables over one P4Info message."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.actions: dict[int, ActionInfo] = {}
        for a in p4info.actions:
            self.actions[a.preamble.id] = ActionInfo(
                a.preamble.id, a.preamble.name,
                tuple(ParamInfo(p.id, p.name, p.bitwidth) for p in a.params))
        self.direct_counters: dict[int, ResourceInfo] = {
            c.preamble.id: ResourceInfo(c.preamble.id, c.preamble.name, 0,
                                        direct_table_id=c.direct_table_id, unit=c.spec.unit)
            for c in p4info.direct_counters}
        self.direct_meters: dict[int, ResourceInfo] = {
            m.preamble.id: ResourceInfo(m.preamble.id, m.preamble.name, 0,
                                        direct_table_id=m.direct_table_id, unit=m.spec.unit)
            for m in p4info.direct_meters}
        self.counters: dict[int, ResourceInfo] = {
            c.preamble.id: ResourceInfo(c.preamble.id, c.preamble.name, c.size, unit=c.spec.unit)
            for c in p4info.counters}
        self.meters: dict[int, ResourceInfo] = {
            m.preamble.id: ResourceInfo(m.preamble.id, m.preamble.name, m.size, unit=m.spec.unit)
            for m in p4info.meters}
        self.registers: dict[int, ResourceInfo] = {}
        for r in p4info.registers:
            width = r.type_spec.bitstring.bit.bitwidth or r.type_spec.bitstring.int.bitwidth
            self.registers[r.preamble.id] = ResourceInfo(r.preamble.id, r.preamble.name, r.size,
                                                         bitwidth=width)
        self.tables: dict[int, TableInfo] = {}
        for t in p4info.tables:
            refs = {ref.id: ref.scope for ref in t.action_refs}
            direct_counter = next((i for i in t.direct_resource_ids if i in self.direct_counters), 0)
            direct_meter = next((i for i in t.direct_resource_ids if i in self.direct_meters), 0)
            self.tables[t.preamble.id] = TableInfo(
                id=t.preamble.id, name=t.preamble.name,
                match_fields=tuple(MatchFieldInfo(f.id, f.name, f.bitwidth, f.match_type)
                                   for f in t.match_fields),
                action_ids=frozenset(refs),
                table_only_action_ids=frozenset(
                    i for i, s in refs.items() if s == p4info_pb2.ActionRef.TABLE_ONLY),
                default_only_action_ids=frozenset(
                    i for i, s in refs.items() if s == p4info_pb2.ActionRef.DEFAULT_ONLY),
                const_default_action_id=t.const_default_action_id,
                is_const=t.is_const_table, size=t.size,
                direct_counter_id=direct_counter, direct_meter_id=direct_meter,
                needs_priority=any(f.match_type in (TERNARY, RANGE, OPTIONAL)
                                   for f in t.match_fields))
        self.table_by_name = {t.name: t for t in self.tables.values()}
        self.action_by_name = {a.name: a for a in self.actions.values()}
        self.packet_metadata: dict[str, tuple[PacketMetadataInfo, ...]] = {
            h.preamble.name: tuple(PacketMetadataInfo(m.id, m.name, m.bitwidth) for m in h.metadata)
            for h in p4info.controller_packet_metadata}

    # Lookups raising the PI-style error for an unknown id.
    def table(self, table_id: int) -> TableInfo:
        return _get(self.tables, table_id, "table")

    def action(self, action_id: int) -> ActionInfo:
        return _get(self.actions, action_id, "action")

    def counter(self, counter_id: int) -> ResourceInfo:
        return _get(self.counters, counter_id, "counter")

    def meter(self, meter_id: int) -> ResourceInfo:
        return _get(self.meters, meter_id, "meter")

    def register(self, register_id: int) -> ResourceInfo:
        return _get(self.registers, register_id, "register")


def _get(index: dict[int, _T], ident: int, kind: str) -> _T:
    try:
        return index[ident]
    except KeyError:
        raise P4RTError(Code.INVALID_ARGUMENT, f"Invalid {kind} id {ident}") from None
