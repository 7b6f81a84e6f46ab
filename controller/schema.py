"""The P4Info index: names ↔ ids for tables, actions, fields, counters, meters, registers.

Lookups accept the full control-plane name (`MyIngress.ipv4_lpm`) or its alias (`ipv4_lpm`), and
a miss says what the nearest known name is, e.g. "no table named 'ipv4_lmp'. Did you mean
'ipv4_lpm'?".  The schema is a value passed to whoever needs it; nothing here is global.
"""
from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from p4.config.v1 import p4info_pb2

from netsum import schema as p4schema
from netsum.schema import (ActionInfo, MatchField, NameIndex, P4Schema, Param, ResourceInfo,
                      TableInfo, UnknownName, suggest)
from netsum.controller.errors import ControllerError, SchemaLookupError

__all__ = ["Schema", "TableInfo", "MatchField", "ActionInfo", "Param", "ResourceInfo",
           "load_p4info", "suggest"]


_T = TypeVar("_T", TableInfo, ActionInfo, ResourceInfo)


def _get(index: NameIndex[_T], name: str) -> _T:
    try:
        return index.get(name)
    except UnknownName as exc:
        raise SchemaLookupError(exc.message) from None


class Schema(P4Schema):
    """The shared P4Info index (`p4schema`) with the controller's name lookups: misses raise
    SchemaLookupError naming the nearest known name."""

    # -- lookups ------------------------------------------------------------------------------
    def table(self, name: str) -> TableInfo:
        return _get(self.tables, name)

    def action(self, name: str) -> ActionInfo:
        return _get(self.actions, name)

    def counter(self, name: str) -> ResourceInfo:
        try:
            return _get(self.counters, name)
        except SchemaLookupError:
            for d in self.direct_counters:
                if name in (d.name, d.alias):
                    table = self.tables.get_id(d.direct_table_id)
                    raise SchemaLookupError(
                        f"{name!r} is a direct counter of table {table.alias!r}: its values "
                        f"come with the entries (table_dump {table.alias})") from None
            raise

    def table_action(self, table: TableInfo, name: str) -> ActionInfo:
        """An action the table may use; a miss names the table's actions."""
        allowed = [self.actions.get_id(i) for i in table.action_ids]
        for a in allowed:
            if name in (a.name, a.alias, a.name.rsplit(".", 1)[-1]):
                return a
        known = [a.alias for a in allowed]
        try:
            other = self.actions.get(name)
        except UnknownName:
            raise SchemaLookupError(f"table {table.alias!r} has no action {name!r}."
                                    f"{suggest(name, known)} Its actions: "
                                    f"{', '.join(known)}") from None
        raise SchemaLookupError(f"action {other.alias!r} is not an action of table "
                                f"{table.alias!r} (its actions: {', '.join(known)})")

    def key_field(self, table: TableInfo, name: str) -> MatchField:
        for f in table.match_fields:
            if f.name == name or f.name.rsplit(".", 1)[-1] == name:
                return f
        known = [f.name for f in table.match_fields]
        raise SchemaLookupError(f"table {table.alias!r} has no key field {name!r}."
                                f"{suggest(name, known)}".rstrip("."))

    def param(self, action: ActionInfo, name: str) -> Param:
        for p in action.params:
            if p.name == name:
                return p
        known = [p.name for p in action.params]
        raise SchemaLookupError(f"action {action.alias!r} has no parameter {name!r}."
                                f"{suggest(name, known)}".rstrip("."))


def load_p4info(path: str | Path) -> p4info_pb2.P4Info:
    """Read a P4Info file: text format (`.txt`, `.txtpb`), JSON (`.json`) or binary (`.bin`)."""
    try:
        return p4schema.load_p4info(path)
    except p4schema.P4InfoError as exc:
        raise ControllerError(str(exc)) from None
