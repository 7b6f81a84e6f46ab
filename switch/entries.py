"""Control-plane values of the embedded switch: match keys, actions, table entries, replicas.

These are the types shared by the data plane (`switch.tables`, `switch.replication`) and every
control plane on top of it (the P4Runtime server, tests).  All values are plain Python ints;
byte-string encodings belong to the P4Runtime layer.

Conventions (same as P4Runtime, not bmv2's internal ones):
- A key is one match per key field, in the table's key order.  Wildcards are explicit:
  Ternary(0, 0), Lpm(0, 0), Range(0, 2**w - 1), Optional(None).
- `priority`: larger wins among overlapping entries.  It must be > 0 when the table has a ternary,
  range or optional field, and 0 otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

__all__ = [
    "Exact", "Lpm", "Ternary", "Range", "Optional", "Match", "ActionCall", "TableEntry",
    "Replica", "CounterValue", "MeterConfig",
]


@dataclass(frozen=True, slots=True)
class Exact:
    value: int


@dataclass(frozen=True, slots=True)
class Lpm:
    value: int          # already masked to the prefix
    prefix_len: int


@dataclass(frozen=True, slots=True)
class Ternary:
    value: int          # already masked (value & mask == value)
    mask: int


@dataclass(frozen=True, slots=True)
class Range:
    low: int
    high: int           # inclusive


@dataclass(frozen=True, slots=True)
class Optional:
    value: int | None   # None = wildcard


Match = Union[Exact, Lpm, Ternary, Range, Optional]


@dataclass(frozen=True, slots=True)
class ActionCall:
    action: str                   # action name as in the JSON / P4Info, e.g. "MyIngress.fwd"
    params: tuple[int, ...] = ()  # one int per runtime_data entry, in order


@dataclass(frozen=True, slots=True)
class CounterValue:
    packets: int = 0
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class MeterConfig:
    """Two-rate three-colour meter (RFC 2698), rates per second in the meter's unit."""
    cir: int
    cburst: int
    pir: int
    pburst: int


@dataclass(slots=True)
class TableEntry:
    key: tuple[Match, ...]
    action: ActionCall
    priority: int = 0
    # Direct resources attached to this entry (when the table has them).
    counter: CounterValue = field(default_factory=CounterValue)
    meter: MeterConfig | None = None
    is_const: bool = False


@dataclass(frozen=True, slots=True)
class Replica:
    port: int   # egress port
    rid: int    # replication id, becomes standard_metadata.egress_rid (P4Runtime `instance`)
