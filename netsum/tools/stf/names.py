"""How STF files spell P4Info names, resolved through the client library's schema.

STF files name tables, actions, keys and externs loosely: `add test1 ...` for the table
`ingress.test1`, `extra$0.h` for the key `hdrs.extra[0].h`, `data.$valid` for
`hdrs.data.$valid$`.  p4c's bmv2 driver looked names up in the JSON (whose names are the
P4Info's): an exact name first, then the one object whose name ends with the given one, a dotted
suffix breaking a tie (`netsum.p4rt.schema.Schema`'s `suffix=True` lookups).  Keys also try
`NAME$`, `NAME.$valid$`, `.valid` -> `$valid$` and a dotted suffix, in that order.  Misses raise
the library's `SchemaLookupError`, naming the nearest name.
"""
from __future__ import annotations

import re

from netsum.p4rt.errors import SchemaLookupError
from netsum.p4rt.schema import ActionInfo, MatchField, ResourceInfo, Schema, TableInfo, suggest

__all__ = ["table", "action", "key_field", "counter", "register", "meter"]

_STACK_INDEX = re.compile(r"^(.*)\$([0-9]+)(.*)$")


def table(schema: Schema, name: str) -> TableInfo:
    return schema.table(name, suffix=True)


def action(schema: Schema, t: TableInfo, name: str) -> ActionInfo:
    """One of the table's actions."""
    return schema.table_action(t, name, suffix=True)


def key_field(t: TableInfo, name: str) -> MatchField:
    """The key field an STF key name means (p4c's driver's fallbacks, in its order)."""
    m = _STACK_INDEX.match(name)
    if m:
        name = f"{m.group(1)}[{m.group(2)}]{m.group(3)}"
    fields = {f.name: f for f in t.match_fields}
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
        raise SchemaLookupError(f"key field {name!r} of table {t.name!r} is ambiguous: "
                                f"{', '.join(f.name for f in hits)}")
    if hits:
        return hits[0]
    if name == "valid" and "$valid$" in fields:
        return fields["$valid$"]
    raise SchemaLookupError(f"no key field named {name!r} in table {t.name!r}."
                            f"{suggest(name, list(fields))}".rstrip("."))


def counter(schema: Schema, name: str) -> tuple[str, ResourceInfo]:
    """('counter' | 'direct', the counter): `check_counter` names either kind."""
    try:
        return "counter", schema.counter(name, suffix=True)
    except SchemaLookupError as first:
        try:
            return "direct", schema.direct_counter(name, suffix=True)
        except SchemaLookupError:
            raise first from None


def register(schema: Schema, name: str) -> ResourceInfo:
    return schema.register(name, suffix=True)


def meter(schema: Schema, name: str) -> ResourceInfo:
    return schema.meter(name, suffix=True)
