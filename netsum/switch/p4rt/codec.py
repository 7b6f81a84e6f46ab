"""Value codecs of the P4Runtime layer: P4Runtime byte strings <-> Python ints.

P4Runtime spec §8.4 ("Bytestrings"): a value of a `bit<W>` field travels as a big-endian byte
string.  A server must accept any byte string of length >= 1 whose value fits in W bits
(shorter and zero-padded encodings included) and must reply with the canonical form: the
shortest string holding the value, i.e. leading zero bytes stripped, and 0 encoded as b"\\x00".
PI answers a value wider than the field with INVALID_ARGUMENT; so does this module.
"""
from __future__ import annotations

from netsum.switch.p4rt.errors import P4RTError
from netsum.switch.errors import Code

__all__ = ["decode_uint", "encode_uint", "nbytes"]


def nbytes(bitwidth: int) -> int:
    """Bytes of a padded (non-canonical) encoding of a `bit<bitwidth>` value."""
    return (bitwidth + 7) // 8


def decode_uint(data: bytes, bitwidth: int, what: str) -> int:
    """Decode a byte string for a `bit<bitwidth>` field; `what` names it in errors."""
    if not data:
        raise P4RTError(Code.INVALID_ARGUMENT, f"{what}: empty byte string (spec §8.4 needs >= 1 byte)")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise P4RTError(
            Code.INVALID_ARGUMENT,
            f"{what}: bytestring provided does not fit within {bitwidth} bits "
            f"({len(data)} bytes, value 0x{value:x})")
    return value


def encode_uint(value: int, bitwidth: int | None = None) -> bytes:
    """Canonical encoding (spec §8.4): no leading zero bytes, 0 is b"\\x00".

    `bitwidth` is accepted for symmetry and checked: a data-plane value wider than its field
    would be a bug, never something to send."""
    if value < 0 or (bitwidth is not None and value >> bitwidth):
        raise ValueError(f"value {value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
