"""The P4Info index: every object found by id, full name or alias; loading P4Info files.

A lookup by name accepts the full control-plane name (`MyIngress.ipv4_lpm`), its P4Info alias
(`ipv4_lpm`) or the last dotted component when that is unambiguous; a miss names the nearest
known name ("no table named 'ipv4_lmp'. Did you mean 'ipv4_lpm'?").  Misses raise `UnknownName`
or `UnknownId` (both LookupError); each user of the index turns them into its own error kind
(the controller's SchemaLookupError, the P4Runtime server's INVALID_ARGUMENT).
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from google.protobuf import json_format, text_format
from p4.config.v1 import p4info_pb2

from netsum.schema.model import (ActionInfo, MatchField, PacketMetadataInfo, Param, ResourceInfo,
                            TableInfo, ValueSetInfo, match_kind, table_info)

__all__ = ["P4Schema", "NameIndex", "UnknownId", "UnknownName", "P4InfoError", "load_p4info",
           "parse_p4info", "suggest", "by_suffix"]


class UnknownName(LookupError):
    def __init__(self, kind: str, name: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name
        self.message = message

    def __str__(self) -> str:
        return self.message


class UnknownId(LookupError):
    def __init__(self, kind: str, ident: int) -> None:
        super().__init__(f"no {kind} with id {ident}")
        self.kind = kind
        self.ident = ident


class P4InfoError(ValueError):
    """A P4Info file that cannot be read or parsed."""


def suggest(name: str, known: Iterable[str]) -> str:
    """" Did you mean 'x'?" for the nearest known name, or "" when nothing is close.  A dotted
    name also competes by its last component (`rout` is near `ingress.route`)."""
    shown: dict[str, str] = {}
    for k in known:
        shown[k] = k
        shown.setdefault(k.rsplit(".", 1)[-1], k)
    close = difflib.get_close_matches(name, list(shown), n=1, cutoff=0.6)
    return f" Did you mean {shown[close[0]]!r}?" if close else ""


class _HasName(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_HasName)


def by_suffix(kind: str, name: str, items: Iterable[N], where: str = "") -> N:
    """The item named `name`, else the one item whose name ends with it; among several, the one
    that ends with "." + `name` (p4c's bmv2 STF driver's rule, looser than `NameIndex.get`: `ges`
    finds `egress.ranges`, and `x` finds `egress.x` beside `egress.max`).  `where` qualifies the
    messages (" in table 'ingress.acl'")."""
    cands = list(items)
    for it in cands:
        if it.name == name:
            return it
    hits = [it for it in cands if it.name.endswith(name)]
    if len(hits) > 1:
        dotted = [it for it in hits if it.name.endswith("." + name)]
        if len(dotted) == 1:
            return dotted[0]
        raise UnknownName(kind, name, f"{kind} name {name!r}{where} is ambiguous: "
                          f"{', '.join(sorted(it.name for it in hits))}")
    if not hits:
        known = [it.name for it in cands]
        raise UnknownName(kind, name, f"no {kind} named {name!r}{where}."
                          f"{suggest(name, known)}".rstrip("."))
    return hits[0]


class _Named(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def alias(self) -> str: ...


T = TypeVar("T", bound=_Named)


class NameIndex(Generic[T]):
    """One kind of object, by id, full name or alias."""

    def __init__(self, kind: str, items: Iterable[T]) -> None:
        self.kind = kind
        self.by_id: dict[int, T] = {}
        self.by_name: dict[str, T] = {}
        aliases: dict[str, list[T]] = {}
        for item in items:
            self.by_id[item.id] = item
            self.by_name.setdefault(item.name, item)
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
            raise UnknownName(self.kind, name, f"{self.kind} name {name!r} is ambiguous: "
                              f"{', '.join(sorted(self.ambiguous[name]))}")
        known = [*self.by_name, *self.by_alias]
        if not known:
            raise UnknownName(self.kind, name, f"no {self.kind} named {name!r}: the program "
                              f"has no {self.kind}s")
        raise UnknownName(self.kind, name, f"no {self.kind} named {name!r}."
                          f"{suggest(name, known)}".rstrip("."))

    def get_id(self, ident: int) -> T:
        try:
            return self.by_id[ident]
        except KeyError:
            raise UnknownId(self.kind, ident) from None

    def values(self) -> Iterable[T]:
        return self.by_id.values()

    def __iter__(self) -> Iterator[T]:
        return iter(self.by_id.values())

    def __len__(self) -> int:
        return len(self.by_id)

    def __contains__(self, ident: object) -> bool:
        return ident in self.by_id


def _resource(kind: str, items: Iterable[ResourceInfo]) -> NameIndex[ResourceInfo]:
    return NameIndex(kind, items)


class P4Schema:
    """Read-only lookup tables over one P4Info message."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.actions: NameIndex[ActionInfo] = NameIndex("action", (
            ActionInfo(a.preamble.id, a.preamble.name, a.preamble.alias or a.preamble.name,
                       tuple(Param(p.id, p.name, p.bitwidth) for p in a.params))
            for a in p4info.actions))
        pre = (lambda r: (r.preamble.id, r.preamble.name, r.preamble.alias or r.preamble.name))
        self.counters = _resource("counter", (
            ResourceInfo(*pre(c), c.size, unit=c.spec.unit) for c in p4info.counters))
        self.direct_counters = _resource("direct counter", (
            ResourceInfo(*pre(c), 0, direct_table_id=c.direct_table_id, unit=c.spec.unit)
            for c in p4info.direct_counters))
        self.meters = _resource("meter", (
            ResourceInfo(*pre(m), m.size, unit=m.spec.unit) for m in p4info.meters))
        self.direct_meters = _resource("direct meter", (
            ResourceInfo(*pre(m), 0, direct_table_id=m.direct_table_id, unit=m.spec.unit)
            for m in p4info.direct_meters))
        self.registers = _resource("register", (
            ResourceInfo(*pre(r), r.size, bitwidth=r.type_spec.bitstring.bit.bitwidth
                         or r.type_spec.bitstring.int.bitwidth,
                         signed=not r.type_spec.bitstring.bit.bitwidth
                         and bool(r.type_spec.bitstring.int.bitwidth))
            for r in p4info.registers))
        dc, dm = set(self.direct_counters.by_id), set(self.direct_meters.by_id)
        self.tables: NameIndex[TableInfo] = NameIndex(
            "table", (table_info(t, dc, dm) for t in p4info.tables))
        self.value_sets: NameIndex[ValueSetInfo] = NameIndex("value set", (
            ValueSetInfo(*pre(v), tuple(MatchField(f.id, f.name, f.bitwidth,
                                                   match_kind(f.match_type)) for f in v.match),
                         v.size)
            for v in p4info.value_sets))
        #: controller_packet_metadata by preamble name ("packet_in", "packet_out").
        self.packet_metadata: dict[str, tuple[PacketMetadataInfo, ...]] = {
            h.preamble.name: tuple(PacketMetadataInfo(m.id, m.name, m.bitwidth)
                                   for m in h.metadata)
            for h in p4info.controller_packet_metadata}


def parse_p4info(data: bytes, fmt: str = "text", what: str = "P4Info") -> p4info_pb2.P4Info:
    """A P4Info message from bytes in `text` (`.txtpb`, `.txt`), `json` or `bin` format."""
    info = p4info_pb2.P4Info()
    try:
        if fmt == "bin":
            info.ParseFromString(data)
        elif fmt == "json":
            json_format.Parse(data.decode(), info, ignore_unknown_fields=True)
        else:
            text_format.Merge(data.decode(), info, allow_unknown_field=True)
    except Exception as exc:  # protobuf raises several unrelated types for bad input
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise P4InfoError(f"{what} does not parse: {first}") from None
    return info


def load_p4info(path: str | Path) -> p4info_pb2.P4Info:
    """Read a P4Info file: text format (`.txt`, `.txtpb`), JSON (`.json`) or binary (`.bin`)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise P4InfoError(f"cannot read P4Info {str(p)!r}: {exc.strerror or exc}") from None
    fmt = {".bin": "bin", ".json": "json"}.get(p.suffix, "text")
    info = parse_p4info(data, fmt, f"P4Info {str(p)!r}")
    if not info.tables and not info.actions:
        raise P4InfoError(f"P4Info {str(p)!r} declares no tables or actions")
    return info
