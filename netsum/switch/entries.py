"""Control-plane values of the embedded switch: match keys, actions, table entries, replicas.

These are the types shared by the data plane (`netsum.switch.tables`, `netsum.switch.replication`) and every
control plane on top of it (the P4Runtime server, tests).  All values are plain Python ints;
byte-string encodings belong to the P4Runtime layer.  The match values (`Exact`, `Lpm`, ...)
are `netsum.match`'s, the one definition the P4Runtime client uses too; re-exported here.

Conventions (same as P4Runtime, not bmv2's internal ones):
- A key is one match per key field, in the table's key order.  Wildcards are explicit:
  Ternary(0, 0), Lpm(0, 0), Range(0, 2**w - 1), Optional(None).
- `priority`: larger wins among overlapping entries.  It must be > 0 when the table has a ternary,
  range or optional field, and 0 otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from netsum.match import Exact, Lpm, Match, Optional, Range, Ternary

__all__ = [
    "Exact", "Lpm", "Ternary", "Range", "Optional", "Match", "ActionCall", "TableEntry",
    "Replica", "CounterValue", "MeterConfig", "widen_slice", "narrow_slice", "Ref", "MEMBER",
    "GROUP",
]


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


MEMBER, GROUP = "member", "group"


@dataclass(frozen=True, slots=True)
class Ref:
    """What an entry of an indirect table (one with an action profile) holds: a member or a
    group handle of that profile (netsum.switch.profiles)."""
    kind: str          # MEMBER | GROUP
    handle: int


@dataclass(slots=True)
class TableEntry:
    key: tuple[Match, ...]
    action: ActionCall
    priority: int = 0
    # Direct resources attached to this entry (when the table has them).
    counter: CounterValue = field(default_factory=CounterValue)
    meter: MeterConfig | None = None
    is_const: bool = False
    #: Indirect tables: the member or group the entry points at (`action` is then unused:
    #: ActionCall("")).
    ref: Ref | None = None


@dataclass(frozen=True, slots=True)
class Replica:
    port: int   # egress port
    rid: int    # replication id, becomes standard_metadata.egress_rid (P4Runtime `instance`)


def widen_slice(m: Match, shift: int, width: int, field_width: int) -> Match:
    """A match on a key slice `f[h:l]` (values `width` = h-l+1 bits wide, as P4Runtime and p4c's
    const entries write them) -> the same match on the field `f & mask` the data plane
    compares: values move up by `shift` = l.  bmv2 counts an lpm prefix from the field's top
    bit; the bits above the slice are masked off by the key mask, so they join the prefix."""
    if not shift and width == field_width:
        return m
    if isinstance(m, Exact):
        return Exact(m.value << shift)
    if isinstance(m, Lpm):
        top = field_width - shift - width
        return Lpm(m.value << shift, top + m.prefix_len if m.prefix_len else 0)
    if isinstance(m, Ternary):
        return Ternary(m.value << shift, m.mask << shift)
    if isinstance(m, Range):
        return Range(m.low << shift, m.high << shift)
    return Optional(None if m.value is None else m.value << shift)


def narrow_slice(m: Match, shift: int, width: int, field_width: int) -> Match:
    """The inverse of `widen_slice`: a data-plane match on `f & mask` -> the slice's match."""
    if not shift and width == field_width:
        return m
    full = (1 << width) - 1
    if isinstance(m, Exact):
        return Exact((m.value >> shift) & full)
    if isinstance(m, Lpm):
        top = field_width - shift - width
        return Lpm((m.value >> shift) & full, max(m.prefix_len - top, 0))
    if isinstance(m, Ternary):
        return Ternary((m.value >> shift) & full, (m.mask >> shift) & full)
    if isinstance(m, Range):
        return Range((m.low >> shift) & full, (m.high >> shift) & full)
    return Optional(None if m.value is None else (m.value >> shift) & full)
