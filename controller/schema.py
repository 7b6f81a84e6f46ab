"""The P4Info index: names ↔ ids for tables, actions, fields, counters, meters, registers.

Lookups accept the full control-plane name (`MyIngress.ipv4_lpm`) or its alias (`ipv4_lpm`), and
a miss says what the nearest known name is, e.g. "no table named 'ipv4_lmp'. Did you mean
'ipv4_lpm'?".  The schema is a value passed to whoever needs it; nothing here is global.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Iterable, Iterator, TypeVar

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from controller.errors import ControllerError, SchemaLookupError
from controller.values import MatchKind

__all__ = ["Schema", "TableInfo", "KeyField", "ActionInfo", "Param", "CounterInfo",
           "load_p4info", "suggest"]

_MATCH_KINDS = {
    p4info_pb2.MatchField.EXACT: MatchKind.EXACT,
    p4info_pb2.MatchField.LPM: MatchKind.LPM,
    p4info_pb2.MatchField.TERNARY: MatchKind.TERNARY,
    p4info_pb2.MatchField.RANGE: MatchKind.RANGE,
    p4info_pb2.MatchField.OPTIONAL: MatchKind.OPTIONAL,
}


@dataclass(frozen=True, slots=True)
class KeyField:
    id: int
    name: str
    bitwidth: int
    kind: MatchKind


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


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    name: str
    alias: str
    key: tuple[KeyField, ...]
    action_ids: tuple[int, ...]
    size: int
    is_const: bool
    const_default_action_id: int
    direct_counter_id: int

    @property
    def needs_priority(self) -> bool:
        """Ternary, range and optional keys order entries by priority (spec §9.1)."""
        return any(f.kind in (MatchKind.TERNARY, MatchKind.RANGE, MatchKind.OPTIONAL)
                   for f in self.key)


@dataclass(frozen=True, slots=True)
class CounterInfo:
    id: int
    name: str
    alias: str
    size: int           # 0 for a direct counter (sized by its table)
    unit: str           # PACKETS | BYTES | BOTH
    direct_table_id: int


T = TypeVar("T", TableInfo, ActionInfo, CounterInfo)


def suggest(name: str, known: Iterable[str]) -> str:
    """" Did you mean 'x'?" for the nearest known name, or "" when nothing is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


class _Index(Generic[T]):
    """One kind of object, found by full name, alias or id."""

    def __init__(self, kind: str, items: Iterable[T]) -> None:
        self.kind = kind
        self.by_id: dict[int, T] = {}
        self.by_name: dict[str, T] = {}
        aliases: dict[str, list[T]] = {}
        for item in items:
            self.by_id[item.id] = item
            self.by_name[item.name] = item
            aliases.setdefault(item.alias, []).append(item)
            # The last dotted component also works when unambiguous (`ipv4_lpm` for
            # `MyIngress.ipv4_lpm` even if p4c chose a longer alias elsewhere).
            short = item.name.rsplit(".", 1)[-1]
            if short != item.alias:
                aliases.setdefault(short, []).append(item)
        self.by_alias: dict[str, T] = {a: v[0] for a, v in aliases.items() if len(v) == 1}
        self.ambiguous: dict[str, list[str]] = {a: [i.name for i in v]
                                                for a, v in aliases.items() if len(v) > 1}

    def get(self, name: str) -> T:
        if name in self.by_name:
            return self.by_name[name]
        if name in self.by_alias:
            return self.by_alias[name]
        if name in self.ambiguous:
            raise SchemaLookupError(f"{self.kind} name {name!r} is ambiguous: "
                                    f"{', '.join(sorted(self.ambiguous[name]))}")
        known = [*self.by_name, *self.by_alias]
        if not known:
            raise SchemaLookupError(f"no {self.kind} named {name!r}: the program has no "
                                    f"{self.kind}s")
        raise SchemaLookupError(f"no {self.kind} named {name!r}.{suggest(name, known)}".rstrip("."))

    def get_id(self, id_: int) -> T:
        try:
            return self.by_id[id_]
        except KeyError:
            raise SchemaLookupError(f"no {self.kind} with id {id_}") from None

    def __iter__(self) -> Iterator[T]:
        return iter(self.by_id.values())


class Schema:
    """An index over one P4Info message."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.actions: _Index[ActionInfo] = _Index("action", (
            ActionInfo(a.preamble.id, a.preamble.name, a.preamble.alias or a.preamble.name,
                       tuple(Param(p.id, p.name, p.bitwidth) for p in a.params))
            for a in p4info.actions))
        self.tables: _Index[TableInfo] = _Index("table", (
            TableInfo(t.preamble.id, t.preamble.name, t.preamble.alias or t.preamble.name,
                      tuple(KeyField(f.id, f.name, f.bitwidth, _kind(t.preamble.name, f))
                            for f in t.match_fields),
                      tuple(r.id for r in t.action_refs), t.size, t.is_const_table,
                      t.const_default_action_id,
                      next(iter(t.direct_resource_ids), 0))
            for t in p4info.tables))
        units = {0: "UNSPECIFIED", 1: "BYTES", 2: "PACKETS", 3: "BOTH"}
        self.counters: _Index[CounterInfo] = _Index("counter", (
            CounterInfo(c.preamble.id, c.preamble.name, c.preamble.alias or c.preamble.name,
                        c.size, units.get(c.spec.unit, "UNSPECIFIED"), 0)
            for c in p4info.counters))
        self.direct_counters: _Index[CounterInfo] = _Index("direct counter", (
            CounterInfo(c.preamble.id, c.preamble.name, c.preamble.alias or c.preamble.name,
                        0, units.get(c.spec.unit, "UNSPECIFIED"), c.direct_table_id)
            for c in p4info.direct_counters))

    # -- lookups ------------------------------------------------------------------------------
    def table(self, name: str) -> TableInfo:
        return self.tables.get(name)

    def action(self, name: str) -> ActionInfo:
        return self.actions.get(name)

    def counter(self, name: str) -> CounterInfo:
        try:
            return self.counters.get(name)
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
        except SchemaLookupError:
            raise SchemaLookupError(f"table {table.alias!r} has no action {name!r}."
                                    f"{suggest(name, known)} Its actions: "
                                    f"{', '.join(known)}") from None
        raise SchemaLookupError(f"action {other.alias!r} is not an action of table "
                                f"{table.alias!r} (its actions: {', '.join(known)})")

    def key_field(self, table: TableInfo, name: str) -> KeyField:
        for f in table.key:
            if f.name == name or f.name.rsplit(".", 1)[-1] == name:
                return f
        known = [f.name for f in table.key]
        raise SchemaLookupError(f"table {table.alias!r} has no key field {name!r}."
                                f"{suggest(name, known)}".rstrip("."))

    def param(self, action: ActionInfo, name: str) -> Param:
        for p in action.params:
            if p.name == name:
                return p
        known = [p.name for p in action.params]
        raise SchemaLookupError(f"action {action.alias!r} has no parameter {name!r}."
                                f"{suggest(name, known)}".rstrip("."))


def _kind(table: str, field: p4info_pb2.MatchField) -> MatchKind:
    try:
        return _MATCH_KINDS[field.match_type]
    except KeyError:
        raise SchemaLookupError(f"table {table!r} key field {field.name!r}: match type "
                                f"{field.match_type} is not supported") from None


def load_p4info(path: str | Path) -> p4info_pb2.P4Info:
    """Read a P4Info file: text format (`.txt`, `.txtpb`), JSON (`.json`) or binary (`.bin`)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ControllerError(f"cannot read P4Info {str(p)!r}: {exc.strerror or exc}") from None
    info = p4info_pb2.P4Info()
    try:
        if p.suffix == ".bin":
            info.ParseFromString(data)
        elif p.suffix == ".json":
            from google.protobuf import json_format
            json_format.Parse(data.decode(), info, ignore_unknown_fields=True)
        else:
            text_format.Merge(data.decode(), info, allow_unknown_field=True)
    except Exception as exc:  # protobuf raises several unrelated types for bad input
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ControllerError(f"P4Info {str(p)!r} does not parse: {first}") from None
    if not info.tables and not info.actions:
        raise ControllerError(f"P4Info {str(p)!r} declares no tables or actions")
    return info
