"""The client's P4Info lookups: names ↔ ids for tables, actions, fields, counters, meters,
registers, with misses that name the nearest known name.

`Schema` is the shared P4Info index (`netsum.schema.P4Schema`, also the switch server's) with
lookups that raise `SchemaLookupError`, e.g. "no table named 'ipv4_lmp'. Did you mean
'ipv4_lpm'?".  A lookup accepts the full control-plane name (`MyIngress.ipv4_lpm`), its alias
(`ipv4_lpm`) or the last dotted component when unambiguous; `suffix=True` also accepts any
unambiguous trailing part of the name (`netsum.schema.by_suffix`: the looser rule of p4c's STF
driver, which the STF runner keeps).  The schema is a
value passed to whoever needs it; nothing here is global.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from p4.config.v1 import p4info_pb2

from netsum import schema as p4schema
from netsum.p4rt.errors import ClientError, SchemaLookupError
from netsum.schema import (ActionInfo, MatchField, NameIndex, P4Schema, Param, ResourceInfo,
                           TableInfo, UnknownName, by_suffix, suggest)

__all__ = ["Schema", "TableInfo", "MatchField", "ActionInfo", "Param", "ResourceInfo",
           "load_p4info", "suggest"]

_R = TypeVar("_R")
_T = TypeVar("_T", TableInfo, ActionInfo, ResourceInfo)


def _lookup(find: Callable[[], _R]) -> _R:
    try:
        return find()
    except UnknownName as exc:
        raise SchemaLookupError(exc.message) from None


def _get(index: NameIndex[_T], name: str, suffix: bool) -> _T:
    if suffix:
        return _lookup(lambda: by_suffix(index.kind, name, index))
    return _lookup(lambda: index.get(name))


class Schema(P4Schema):
    """The shared P4Info index with the client's name lookups."""

    # -- lookups ------------------------------------------------------------------------------
    def table(self, name: str, suffix: bool = False) -> TableInfo:
        return _get(self.tables, name, suffix)

    def action(self, name: str, suffix: bool = False) -> ActionInfo:
        return _get(self.actions, name, suffix)

    def counter(self, name: str, suffix: bool = False) -> ResourceInfo:
        try:
            return _get(self.counters, name, suffix)
        except SchemaLookupError:
            for d in self.direct_counters:
                if name in (d.name, d.alias) or (suffix and d.name.endswith(name)):
                    table = self.tables.get_id(d.direct_table_id)
                    raise SchemaLookupError(
                        f"{name!r} is a direct counter of table {table.alias!r}: its values "
                        f"come with the entries (table_dump {table.alias})") from None
            raise

    def direct_counter(self, name: str, suffix: bool = False) -> ResourceInfo:
        return _get(self.direct_counters, name, suffix)

    def meter(self, name: str, suffix: bool = False) -> ResourceInfo:
        return _get(self.meters, name, suffix)

    def register(self, name: str, suffix: bool = False) -> ResourceInfo:
        return _get(self.registers, name, suffix)

    def table_actions(self, table: TableInfo) -> list[ActionInfo]:
        return [self.actions.get_id(i) for i in table.action_ids]

    def table_action(self, table: TableInfo, name: str, suffix: bool = False) -> ActionInfo:
        """An action the table may use; a miss names the table's actions."""
        allowed = self.table_actions(table)
        if suffix:
            return _lookup(lambda: by_suffix("action", name, allowed,
                                             f" in table {table.name!r}"))
        # The full name first: another action's alias may be this one's full name.
        for a in sorted(allowed, key=lambda a: a.name != name):
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
        # The full name first: `z` is a key of its own beside `m.z` (p4c's issue486-bmv2).
        for f in sorted(table.match_fields, key=lambda f: f.name != name):
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
        raise ClientError(str(exc)) from None
