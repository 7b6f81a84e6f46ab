"""P4Info ids as p4c assigns them (``control-plane/p4RuntimeSymbolTable.cpp``).

id = (resource-type prefix << 24) | (Jenkins one-at-a-time hash of the name & 0xffffff).
``@id`` ids are reserved first; the remaining names of a resource type are processed in sorted
order and a collision probes linearly upward.
"""
from __future__ import annotations

import enum

from .diagnostics import Diagnostics, NOPOS

__all__ = ["Prefix", "jenkins_oaat", "assign_ids"]


class Prefix(enum.IntEnum):
    ACTION = 0x01
    TABLE = 0x02
    VALUE_SET = 0x03
    CONTROLLER_HEADER = 0x04
    ACTION_PROFILE = 0x11
    COUNTER = 0x12
    DIRECT_COUNTER = 0x13
    METER = 0x14
    DIRECT_METER = 0x15
    REGISTER = 0x16
    DIGEST = 0x17


def jenkins_oaat(data: bytes) -> int:
    h = 0
    for b in data:
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


def assign_ids(prefix: Prefix, names: list[tuple[str, int | None]],
               diags: Diagnostics, taken: set[int]) -> dict[str, int]:
    """Ids for (name, explicit @id or None) pairs of one resource type."""
    out: dict[str, int] = {}
    for name, explicit in names:
        if explicit is None:
            continue
        i = explicit if explicit >> 24 else (prefix << 24) | explicit
        if i >> 24 != prefix:
            diags.error(NOPOS, f"@id({explicit}) of '{name}' has the wrong resource prefix "
                               f"(expected 0x{prefix:02x})")
            continue
        if i in taken:
            diags.error(NOPOS, f"@id({explicit}) of '{name}' is already used")
            continue
        taken.add(i)
        out[name] = i
    for name in sorted({n for n, e in names if e is None and n not in out}):
        low = jenkins_oaat(name.encode()) & 0xFFFFFF
        while ((prefix << 24) | low) in taken or low == 0:
            low = (low + 1) & 0xFFFFFF
        i = (prefix << 24) | low
        taken.add(i)
        out[name] = i
    return out
