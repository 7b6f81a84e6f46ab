"""Table keys' vocabulary, defined once: the match kinds and the values a key field matches with.

Shared by the switch's data plane (`netsum.switch.entries`, `tables`), the P4Info model
(`netsum.schema`) and the P4Runtime client (`netsum.p4rt`).  A leaf: it imports nothing (the
data plane must not need protobuf or gRPC to hold a key).

Values are plain ints in P4Runtime's terms (spec §9.1.1): an lpm value is already masked to its
prefix, a ternary value to its mask.  Whether a wildcard is explicit (the data plane:
Ternary(0, 0), Lpm(0, 0), Range(0, 2**w - 1), Optional(None)) or omitted (P4Runtime, which
leaves don't-care fields out of an entry) is the user's convention, said where each one keeps
keys.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

__all__ = ["MatchKind", "Exact", "Lpm", "Ternary", "Range", "Optional", "Match"]


class MatchKind(enum.IntEnum):
    """p4info.proto `MatchField.MatchType` (the numbers are the wire values)."""
    UNSPECIFIED = 0
    EXACT = 2
    LPM = 3
    TERNARY = 4
    RANGE = 5
    OPTIONAL = 6

    @property
    def label(self) -> str:
        """The P4 spelling: `exact`, `lpm`, ... (also BMv2 JSON's `match_type`)."""
        return self.name.lower()

    @classmethod
    def from_label(cls, label: object) -> MatchKind | None:
        """The kind spelled `label` (`exact`, `lpm`, `ternary`, `range`, `optional`: P4's
        and BMv2 JSON's `match_type`); None for anything else."""
        return _BY_LABEL.get(label) if isinstance(label, str) else None

    @property
    def needs_priority(self) -> bool:
        """P4Runtime §9.1: entries of a table with such a field carry a priority."""
        return self in (MatchKind.TERNARY, MatchKind.RANGE, MatchKind.OPTIONAL)


_BY_LABEL = {k.label: k for k in MatchKind if k is not MatchKind.UNSPECIFIED}


@dataclass(frozen=True, slots=True)
class Exact:
    value: int


@dataclass(frozen=True, slots=True)
class Lpm:
    value: int          # masked to the prefix (spec §9.1.1)
    prefix_len: int


@dataclass(frozen=True, slots=True)
class Ternary:
    value: int          # value & mask == value (spec §9.1.1)
    mask: int


@dataclass(frozen=True, slots=True)
class Range:
    low: int
    high: int           # inclusive


@dataclass(frozen=True, slots=True)
class Optional:
    value: int | None   # None = wildcard


Match = Union[Exact, Lpm, Ternary, Range, Optional]
