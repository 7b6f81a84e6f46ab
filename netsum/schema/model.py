"""The P4Info objects netsum works with, as frozen values built once from a P4Info message.

Names follow p4info.proto (`match_fields`, `match_type`, `action_refs` scopes, `direct_table_id`);
`MatchKind` (defined in `netsum.match`, re-exported here) is p4info's `MatchField.MatchType` with
the same wire numbers, so a value read from a message converts with `MatchKind(n)`.
"""
from __future__ import annotations

from dataclasses import dataclass

from p4.config.v1 import p4info_pb2

from netsum.match import MatchKind

__all__ = ["MatchKind", "MatchField", "Param", "ActionInfo", "TableInfo", "ResourceInfo",
           "PacketMetadataInfo", "ValueSetInfo", "UNITS"]


#: Counter/meter `spec.unit` wire values -> names (p4info.proto CounterSpec.Unit).
UNITS = {0: "UNSPECIFIED", 1: "BYTES", 2: "PACKETS", 3: "BOTH"}


@dataclass(frozen=True, slots=True)
class MatchField:
    id: int
    name: str
    bitwidth: int
    match_type: MatchKind


@dataclass(frozen=True, slots=True)
class Param:
    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True, slots=True)
class ActionInfo:
    id: int
    name: str
    alias: str
    params: tuple[Param, ...]

    def param_index(self) -> dict[int, int]:
        """Param id -> position in `params` (the order of runtime data)."""
        return {p.id: i for i, p in enumerate(self.params)}


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    name: str
    alias: str
    match_fields: tuple[MatchField, ...]
    action_ids: tuple[int, ...]                 # in P4Info order
    table_only_action_ids: frozenset[int]       # @tableonly
    default_only_action_ids: frozenset[int]     # @defaultonly
    const_default_action_id: int                # 0 when the default may change
    initial_default_action_id: int              # 0 when the P4Info does not say
    is_const: bool
    size: int
    direct_counter_id: int                      # 0 when none
    direct_meter_id: int                        # 0 when none
    #: P4Runtime §9.1: priority is required iff a field is ternary, range or optional.
    needs_priority: bool
    #: idle_timeout_behavior NOTIFY_CONTROL: entries may carry idle_timeout_ns (§9.1.6).
    supports_timeout: bool = False


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """A counter, meter or register, direct or indirect."""
    id: int
    name: str
    alias: str
    size: int                 # 0 for direct resources (sized by their table)
    bitwidth: int = 0         # registers only
    direct_table_id: int = 0  # direct resources only
    unit: int = 0             # counter/meter `spec.unit` wire value (see UNITS)
    signed: bool = False      # registers only: int<W> cells rather than bit<W>

    @property
    def unit_name(self) -> str:
        return UNITS.get(self.unit, "UNSPECIFIED")


@dataclass(frozen=True, slots=True)
class ValueSetInfo:
    """A parser value set (p4info.proto `ValueSet`): its members' match fields and size."""
    id: int
    name: str
    alias: str
    match: tuple[MatchField, ...]
    size: int


@dataclass(frozen=True, slots=True)
class PacketMetadataInfo:
    """One field of a `controller_packet_metadata` header (packet_in / packet_out)."""
    id: int
    name: str
    bitwidth: int


def match_kind(value: int) -> MatchKind:
    """A MatchField's match_type; values p4info.proto does not define become UNSPECIFIED
    (a handler then refuses entries of that table with a clear error)."""
    try:
        return MatchKind(value)
    except ValueError:
        return MatchKind.UNSPECIFIED


def table_info(t: p4info_pb2.Table, direct_counters: set[int],
               direct_meters: set[int]) -> TableInfo:
    fields = tuple(MatchField(f.id, f.name, f.bitwidth, match_kind(f.match_type))
                   for f in t.match_fields)
    scope = {r.id: r.scope for r in t.action_refs}
    return TableInfo(
        id=t.preamble.id, name=t.preamble.name, alias=t.preamble.alias or t.preamble.name,
        match_fields=fields, action_ids=tuple(scope),
        table_only_action_ids=frozenset(i for i, s in scope.items()
                                        if s == p4info_pb2.ActionRef.TABLE_ONLY),
        default_only_action_ids=frozenset(i for i, s in scope.items()
                                          if s == p4info_pb2.ActionRef.DEFAULT_ONLY),
        const_default_action_id=t.const_default_action_id,
        initial_default_action_id=t.initial_default_action.action_id,
        is_const=t.is_const_table, size=t.size,
        direct_counter_id=next((i for i in t.direct_resource_ids if i in direct_counters), 0),
        direct_meter_id=next((i for i in t.direct_resource_ids if i in direct_meters), 0),
        needs_priority=any(f.match_type.needs_priority for f in fields),
        supports_timeout=t.idle_timeout_behavior == p4info_pb2.Table.NOTIFY_CONTROL)
