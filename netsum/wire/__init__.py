"""The netsum wire format: the one definition of the header, its fields and constants.

Everything that speaks netsum takes the layout from here: the workers' codec (workers/wire.py),
the controller (ports, limits), the P4 program's tests and the docs.  A test checks
`p4/netsum.p4`'s header declaration and constants against `HEADER_FIELDS` and the constants
below, field by field, and `docs/protocol.md`'s tables are rendered from this module.

A leaf package: it imports nothing of the project, so every layer may import it.

Frame: Ethernet / IPv4 / UDP (destination port `UDP_PORT`) / netsum header (16 bytes) /
K x int32 (big-endian, two's complement).  See docs/protocol.md for the byte diagram.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "UDP_PORT", "K_DEFAULT", "K_SUPPORTED", "EXP_BIAS", "EXP_ZERO", "MAX_WORKERS",
    "MAX_SLOTS", "ROUND_BITS", "HEADER_FIELDS", "HEADER_BYTES", "MsgType", "Flags", "Field",
    "payload_bytes", "packet_bytes", "round_set", "next_round",
]

#: UDP port of the aggregation service ("ns" in ASCII).  Packets to this destination port are
#: aggregated; results are sent from this source port.
UDP_PORT = 0x6E73  # 28275

#: Values (int32) per packet.  Fixed per build of the P4 program (-DNETSUM_K=...).
K_DEFAULT = 256
K_SUPPORTED = (32, 64, 128, 256)

#: Exponents travel biased: field value = e + EXP_BIAS, clamped to 1..255.  0 means "no data
#: yet / all-zero block" and is the identity of max().
EXP_BIAS = 127
EXP_ZERO = 0

#: The switch keeps a 32-bit worker bitmap per slot.
MAX_WORKERS = 32

#: Slots of one job: the job table's num_slots is 16 bits (slot indices 0..MAX_SLOTS-1).
MAX_SLOTS = (1 << 16) - 1

#: Width of the per-slot round number; rounds compare modulo 2**ROUND_BITS.
ROUND_BITS = 32


class MsgType(enum.IntEnum):
    DATA = 1      # worker (or leaf switch) -> switch: a contribution for (job, slot, round)
    RESULT = 2    # switch -> worker (or root -> leaf): the aggregate for (job, slot, round)
    STATUS = 3    # switch -> a member that re-sent DATA for a slot still missing contributions:
                  # count/exp so far, value[0] = the slot's member bitmap (never a result)


class Flags(enum.IntFlag):
    NONE = 0
    RETX = 0x01   # the sender retransmits this contribution (informational; counted)


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    bits: int
    doc: str


#: Header fields in wire order.  Widths add up to a whole number of bytes (P4 headers must),
#: and every field is a whole 8/16/32-bit word (the codecs pack words).
HEADER_FIELDS: tuple[Field, ...] = (
    Field("msg_type", 8, "MsgType"),
    Field("flags", 8, "Flags; bit 0 = retransmission"),
    Field("job_id", 16, "aggregation job, assigned by the controller"),
    Field("slot", 16, "slot index within the job's slot range"),
    Field("exp", 8, "biased block exponent proposal; the switch returns the max over contributors"),
    Field("count", 8, "in results (and STATUS): number of contributions aggregated; 0 in data"),
    Field("round", 32, "the slot's use number within the job registration (0 = its first "
                       "use); the shadow set is round & 1"),
    Field("offset", 32, "element offset of this chunk in the tensor"),
)

HEADER_BYTES = sum(f.bits for f in HEADER_FIELDS) // 8
assert sum(f.bits for f in HEADER_FIELDS) % 8 == 0


def payload_bytes(k: int = K_DEFAULT) -> int:
    """Bytes of values after the header."""
    return 4 * k


def packet_bytes(k: int = K_DEFAULT) -> int:
    """Bytes of a whole Ethernet frame carrying one netsum packet (no FCS)."""
    return 14 + 20 + 8 + HEADER_BYTES + payload_bytes(k)


def round_set(round_: int) -> int:
    """The shadow set a round uses: rounds of a slot alternate between its two sets."""
    return round_ & 1


def next_round(round_: int) -> int:
    """The round after `round_` (wraps at 2**ROUND_BITS, as the switch compares modulo it)."""
    return (round_ + 1) & ((1 << ROUND_BITS) - 1)
