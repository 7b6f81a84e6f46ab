"""Names an STF file uses, resolved against a program's P4Info.

STF files name tables, actions, keys and externs loosely: `add test1 ...` for the table
`ingress.test1`, `extra$0.h` for the key `hdrs.extra[0].h`, `data.$valid` for
`hdrs.data.$valid$`.  The rules follow p4c's bmv2 driver, which looked the names up in the JSON
(whose names are the P4Info's): an exact name first, then the one object whose name ends with
the given one (two candidates are an error).  Keys also try `NAME$`, `NAME.$valid$`,
`.valid` -> `$valid$`, and a dotted suffix.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

__all__ = ["StfNameError", "Schema", "load_p4info"]


class StfNameError(LookupError):
    """An STF name that the P4Info does not have (or has more than once)."""


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Named(Generic[T]):
    name: str
    obj: T


def _resolve(kind: str, wanted: str, items: Iterable[_Named[T]], where: str = "") -> T:
    cands = list(items)
    for it in cands:
        if it.name == wanted:
            return it.obj
    hits = [it for it in cands if it.name.endswith(wanted)]
    if len(hits) > 1:
        dotted = [it for it in hits if it.name.endswith("." + wanted)]
        if len(dotted) == 1:
            return dotted[0].obj
        names = ", ".join(sorted(it.name for it in hits))
        raise StfNameError(f"{kind} '{wanted}'{where} is ambiguous: {names}")
    if not hits:
        known = ", ".join(sorted(it.name for it in cands)[:12]) or "none"
        raise StfNameError(f"no {kind} '{wanted}'{where} in the P4Info (has: {known})")
    return hits[0].obj


_STACK_INDEX = re.compile(r"^(.*)\$([0-9]+)(.*)$")


def load_p4info(path: Path) -> Any:
    """A P4Info text file (`.txtpb`/`.txt`) or binary (`.bin`)."""
    info = p4info_pb2.P4Info()
    if path.suffix == ".bin":
        info.ParseFromString(path.read_bytes())
    else:
        text_format.Parse(path.read_text(), info)
    return info


class Schema:
    """Lookups on one P4Info, by the names an STF file uses."""

    def __init__(self, p4info: Any) -> None:
        self.p4info = p4info
        self.actions = {a.preamble.id: a for a in p4info.actions}

    # -- tables and actions --------------------------------------------------------------------
    def table(self, name: str) -> Any:
        return _resolve("table", name, (_Named(t.preamble.name, t) for t in self.p4info.tables))

    def action(self, table: Any, name: str) -> Any:
        acts = [self.actions[r.id] for r in table.action_refs if r.id in self.actions]
        return _resolve("action", name, (_Named(a.preamble.name, a) for a in acts),
                        f" of table '{table.preamble.name}'")

    def match_field(self, table: Any, name: str) -> Any:
        """The key field an STF key name means (p4c's driver's fallbacks, in its order)."""
        m = _STACK_INDEX.match(name)
        if m:
            name = f"{m.group(1)}[{m.group(2)}]{m.group(3)}"
        fields = {f.name: f for f in table.match_fields}
        for cand in (name, name + "$", name + ".$valid$"):
            if cand in fields:
                return fields[cand]
        if name.endswith(".valid"):
            name = name[:-5] + "$valid$"       # the P4_14 spelling of a validity key
            if name in fields:
                return fields[name]
        hits = [f for fname, f in fields.items()
                if fname.endswith("." + name) or fname.endswith("." + name + "$")
                or (name == "valid" and fname.endswith(".$valid$"))]
        if len(hits) > 1:
            raise StfNameError(f"key field '{name}' of table '{table.preamble.name}' is "
                               f"ambiguous: {', '.join(f.name for f in hits)}")
        if hits:
            return hits[0]
        if name == "valid" and "$valid$" in fields:
            return fields["$valid$"]
        known = ", ".join(fields) or "none"
        raise StfNameError(f"no key field '{name}' in table '{table.preamble.name}' "
                           f"(keys: {known})")

    # -- externs -------------------------------------------------------------------------------
    def counter(self, name: str) -> Any:
        return _resolve("counter", name,
                        (_Named(c.preamble.name, c) for c in self.p4info.counters))

    def direct_counter(self, name: str) -> Any:
        return _resolve("direct counter", name,
                        (_Named(c.preamble.name, c) for c in self.p4info.direct_counters))

    def meter(self, name: str) -> Any:
        return _resolve("meter", name, (_Named(m.preamble.name, m) for m in self.p4info.meters))

    def register(self, name: str) -> Any:
        return _resolve("register", name,
                        (_Named(r.preamble.name, r) for r in self.p4info.registers))

    def any_counter(self, name: str) -> tuple[str, Any]:
        """('counter' | 'direct', object): `check_counter` names either kind."""
        try:
            return "counter", self.counter(name)
        except StfNameError as first:
            try:
                return "direct", self.direct_counter(name)
            except StfNameError:
                raise first from None
