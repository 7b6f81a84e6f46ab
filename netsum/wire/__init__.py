"""The netsum wire format (v2): the one definition of the header, its fields and constants.

Everything that speaks netsum takes the layout from here: the workers' codec (workers/wire.py),
the controller (ports, limits), the P4 program's tests and the docs.  A test checks
`p4/netsum.p4`'s header declaration and constants against `HEADER_FIELDS` and the constants
below, field by field, and `docs/protocol.md`'s tables are rendered from this module.

A leaf package: it imports nothing of the project, so every layer may import it.

Frame: Ethernet / IPv4 / UDP (destination port `UDP_PORT`) / netsum header (24 bytes) /
K x int32 (big-endian, two's complement); REJECT replies and ACK results are the header alone.
See docs/protocol.md for the byte diagram and why v2 carries what it carries.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "UDP_PORT", "K_DEFAULT", "K_SUPPORTED", "K_HARDWARE_MAX", "EXP_BIAS", "EXP_ZERO", "MAX_WORKERS",
    "MAX_SLOTS", "ROUND_BITS", "DEST_ALL", "RANK_SWITCH", "HEADER_FIELDS", "HEADER_BYTES",
    "MsgType", "Flags", "Reason", "REASON_FIELD", "Field", "klog2", "payload_bytes",
    "packet_bytes", "header_only_bytes", "round_set", "next_round",
]

#: UDP port of the aggregation service ("ns" in ASCII).  Packets to this destination port are
#: aggregated; results are sent from this source port.
UDP_PORT = 0x6E73  # 28275

#: Values (int32) per packet.  Fixed per build of the P4 program (-DNETSUM_K=...).
K_DEFAULT = 256
K_SUPPORTED = (32, 64, 128, 256, 512, 1024, 2048)
#: The largest K a Tofino-class switch holds per packet (SwitchML: 64-256 values per packet,
#: bounded by the per-stage register accesses of a pipeline pass).  K <= K_HARDWARE_MAX is the
#: faithful setting for hardware-like experiments; larger K (512-2048, frames of 2-8 KB that need
#: jumbo-MTU links, shm frames of 4-8 KB) are an emulation lever only: fewer, larger packets
#: where the emulated link allows them.
K_HARDWARE_MAX = 256

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

#: `dest` of a DATA packet whose RESULT goes whole to every member (all-reduce).  Any other
#: value r is a rank: the RESULT's values go to rank r alone, the others get an ACK.
DEST_ALL = 0xFF

#: The rank the controller gives a contributor that is a switch (a leaf seen from its root),
#: in `set_member` and `set_replica`: it always gets the whole RESULT, and its own egress
#: decides per worker.
RANK_SWITCH = 0xFF


class MsgType(enum.IntEnum):
    DATA = 1      # worker (or leaf switch) -> switch: a contribution for (job, slot, round)
    RESULT = 2    # switch -> worker (or root -> leaf): the aggregate for (job, slot, round)
    STATUS = 3    # switch -> a member that re-sent DATA for a slot still missing contributions:
                  # count/exp so far, value[0] = the slot's member bitmap (never a result)
    REJECT = 4    # switch -> a member whose DATA disagrees with the job or the round (header
                  # only): `reason` says why, the field it names carries the switch's value


class Flags(enum.IntFlag):
    NONE = 0
    RETX = 0x01       # the sender retransmits this contribution (informational; counted)
    NONFINITE = 0x02  # DATA: this block had Inf/NaN elements (sent as 0); RESULT: OR over all
    ACK = 0x04        # a header-only RESULT: the round is complete, its values went to `dest`


class Reason(enum.IntEnum):
    """Why the switch refused a DATA packet (the `reason` of a REJECT, and of a STATUS: the
    job's last refusal; a DATA and a RESULT carry qexp in that byte instead).  The REJECT
    carries, in the field `REASON_FIELD` names, what the switch holds."""
    NONE = 0
    WORKERS = 1   # `workers` differs from the job's member count
    LENGTH = 2    # `length` differs from the one the round's first contribution recorded
    K = 3         # `klog2` differs from the program's build (the values did not fit, or did)
    DEST = 4      # `dest` is not DEST_ALL nor a rank of the job, or differs from the round's
    SLOT = 5      # `slot` is outside the job's slot range
    OFFSET = 6    # `offset` differs from the round's: the members' schedules disagree
    QEXP = 7      # the values are quantized with another exponent (qexp) than the round's:
                  # the ranks' exponent predictions differ


#: Per reason, the header field in which a REJECT returns the switch's value (the job's member
#: count, the round's recorded length / dest / offset, the program's log2 K, the job's
#: number of slots, the round's qexp: `reason` itself says QEXP, so `exp` carries it).
REASON_FIELD: dict[Reason, str] = {
    Reason.WORKERS: "workers", Reason.LENGTH: "length", Reason.K: "klog2",
    Reason.DEST: "dest", Reason.SLOT: "slot", Reason.OFFSET: "offset", Reason.QEXP: "exp",
}


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    bits: int
    doc: str
    default: int = 0    # what an encoder writes when the field is not given


#: Header fields in wire order.  Widths add up to a whole number of bytes (P4 headers must),
#: and every field is a whole 8/16/32-bit word (the codecs pack words).
HEADER_FIELDS: tuple[Field, ...] = (
    Field("msg_type", 8, "MsgType"),
    Field("flags", 8, "Flags: RETX 0x01, NONFINITE 0x02, ACK 0x04"),
    Field("job_id", 16, "aggregation job, assigned by the controller"),
    Field("slot", 16, "slot index within the job's slot range"),
    Field("exp", 8, "biased block exponent proposal; the switch returns the max over contributors"),
    Field("count", 8, "in results (and STATUS): number of contributions aggregated; 0 in data"),
    Field("round", 32, "the slot's use number within the job registration (0 = its first "
                       "use); the shadow set is round & 1"),
    Field("offset", 32, "element offset of this chunk in the tensor"),
    Field("workers", 8, "DATA: the member count the sender was configured with"),
    Field("dest", 8, "DATA: DEST_ALL, or the rank that alone gets the RESULT's values",
          DEST_ALL),
    Field("reason", 8, "REJECT: Reason; STATUS: the job's last refusal; DATA, RESULT: qexp, "
                       "the biased exponent the values are quantized with (EXP_ZERO: none)"),
    Field("klog2", 8, "DATA: log2(K) of the sender's build"),
    Field("length", 32, "DATA: elements of the whole tensor; STATUS: the worker bit of the "
                        "job's last refusal"),
)

HEADER_BYTES = sum(f.bits for f in HEADER_FIELDS) // 8
assert sum(f.bits for f in HEADER_FIELDS) % 8 == 0


def klog2(k: int) -> int:
    """log2(K) as the `klog2` field carries it (K a power of two)."""
    if k < 1 or k & (k - 1):
        raise ValueError(f"K must be a power of two, got {k!r}")
    return k.bit_length() - 1


def payload_bytes(k: int = K_DEFAULT) -> int:
    """Bytes of values after the header."""
    return 4 * k


def packet_bytes(k: int = K_DEFAULT) -> int:
    """Bytes of a whole Ethernet frame carrying one netsum packet (no FCS)."""
    return 14 + 20 + 8 + HEADER_BYTES + payload_bytes(k)


def header_only_bytes() -> int:
    """Bytes of a whole Ethernet frame carrying a header-only packet (REJECT, ACK; no FCS)."""
    return 14 + 20 + 8 + HEADER_BYTES


def round_set(round_: int) -> int:
    """The shadow set a round uses: rounds of a slot alternate between its two sets."""
    return round_ & 1


def next_round(round_: int) -> int:
    """The round after `round_` (wraps at 2**ROUND_BITS, as the switch compares modulo it)."""
    return (round_ + 1) & ((1 << ROUND_BITS) - 1)
