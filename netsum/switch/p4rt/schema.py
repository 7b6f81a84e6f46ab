"""The P4Runtime server's view of the shared P4Info index (`p4schema`).

Every P4Runtime request names objects by P4Info id; the data plane (`netsum.switch.device`) knows them
by their JSON name, which bmv2's PI layer requires to equal the P4Info name.  `Schema` is the
only place that translates, and it answers unknown ids with INVALID_ARGUMENT naming the id
kind, as PI's device_mgr does ("Invalid table id", ...).
"""
from __future__ import annotations

from typing import TypeVar

from netsum.schema import (ActionInfo, MatchField, MatchKind, NameIndex, P4Schema,
                      PacketMetadataInfo, Param, ResourceInfo, TableInfo, UnknownId,
                      ValueSetInfo)
from netsum.switch.errors import Code
from netsum.switch.p4rt.errors import P4RTError

__all__ = ["Schema", "TableInfo", "MatchField", "Param", "ActionInfo", "ResourceInfo",
           "PacketMetadataInfo", "MatchKind", "EXACT", "LPM", "TERNARY", "RANGE", "OPTIONAL"]

# Module constants: cheaper than the enum's attribute lookup on the per-update path.
EXACT, LPM, TERNARY, RANGE, OPTIONAL = (MatchKind.EXACT, MatchKind.LPM, MatchKind.TERNARY,
                                        MatchKind.RANGE, MatchKind.OPTIONAL)
_T = TypeVar("_T", TableInfo, ActionInfo, ResourceInfo, ValueSetInfo)


class Schema(P4Schema):
    """Id lookups raising the PI-style error for an unknown id."""

    def table(self, table_id: int) -> TableInfo:
        return _get(self.tables, table_id)

    def action(self, action_id: int) -> ActionInfo:
        return _get(self.actions, action_id)

    def counter(self, counter_id: int) -> ResourceInfo:
        return _get(self.counters, counter_id)

    def meter(self, meter_id: int) -> ResourceInfo:
        return _get(self.meters, meter_id)

    def register(self, register_id: int) -> ResourceInfo:
        return _get(self.registers, register_id)

    def value_set(self, value_set_id: int) -> ValueSetInfo:
        return _get(self.value_sets, value_set_id)


def _get(index: NameIndex[_T], ident: int) -> _T:
    try:
        return index.get_id(ident)
    except UnknownId:
        raise P4RTError(Code.INVALID_ARGUMENT, f"Invalid {index.kind} id {ident}") from None
