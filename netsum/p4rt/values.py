"""Pure value codecs: command-line literals ↔ Python ints ↔ P4Runtime canonical byte strings.

The match values themselves (`Exact`, `Lpm`, ... and `MatchKind`) are `netsum.match`'s, shared
with the switch's data plane; they are re-exported here for the library's users.

Owns the one place where widths are enforced.  P4Runtime spec §8.4 ("Bytestrings"): a value of
bit<W> travels as a big-endian byte string; the *canonical* form drops leading zero bytes (0 is a
single zero byte).  Servers must accept shorter and zero-padded forms whose value fits W bits and
reply with the canonical form; a value that does not fit is INVALID_ARGUMENT.  Spec §9.1.1 (match
fields): a don't-care match (ternary mask 0, lpm prefix 0, full range, unset optional) is omitted
from the entry, and lpm/ternary values must have no bits outside the prefix/mask.

Literal syntax (what simple_switch_CLI users type): decimal `42`, hex `0x2a`, binary `0b101`,
MAC `00:11:22:33:44:55`, IPv4 `10.0.0.1`; keys: exact `v`, lpm `v/len`, ternary `v&&&mask`,
range `lo->hi`, optional `v` or `*`.
"""
from __future__ import annotations

import ipaddress
import re

from netsum.match import Exact, Lpm, Match, MatchKind, Optional, Range, Ternary
from netsum.p4rt.errors import LiteralError

__all__ = [
    "MatchKind", "Exact", "Lpm", "Ternary", "Range", "Optional", "Match",
    "encode", "decode", "parse_int", "parse_match", "format_int", "format_match", "is_dont_care",
]

_MAC = re.compile(r"^[0-9a-fA-F]{1,2}(:[0-9a-fA-F]{1,2}){5}$")
_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


def encode(value: int, bitwidth: int) -> bytes:
    """`value` as the canonical byte string of a bit<bitwidth> (spec §8.4)."""
    _check_fits(value, bitwidth, "value")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data: bytes, bitwidth: int) -> int:
    """A byte string from the switch as an int; canonical or padded, it must fit (spec §8.4)."""
    if not data:
        raise LiteralError(f"empty byte string for a bit<{bitwidth}> value")
    value = int.from_bytes(data, "big")
    _check_fits(value, bitwidth, f"value 0x{data.hex()}")
    return value


def _check_fits(value: int, bitwidth: int, what: str) -> None:
    if value < 0:
        raise LiteralError(f"{what} {value} is negative; bit<{bitwidth}> holds 0..{2**bitwidth - 1}")
    if value >> bitwidth:
        raise LiteralError(f"{what} {_show(value)} does not fit in bit<{bitwidth}> "
                           f"(max {_show(2**bitwidth - 1)})")


def _show(value: int) -> str:
    return str(value) if value < 1 << 16 else hex(value)


def parse_int(text: str, bitwidth: int, what: str = "value") -> int:
    """One literal (decimal, 0x hex, 0b binary, MAC, IPv4) as an int that fits bit<bitwidth>."""
    t = text.strip()
    try:
        if _MAC.match(t):
            value = int("".join(p.zfill(2) for p in t.split(":")), 16)
        elif _IPV4.match(t):
            value = int(ipaddress.IPv4Address(t))
        elif t.lower().startswith(("0x", "0b", "0o")):
            value = int(t, 0)
        elif t.lstrip("-").isdigit():
            value = int(t, 10)
        else:
            raise ValueError(t)
    except ValueError:
        raise LiteralError(f"{what} {text!r} is not a number, MAC (aa:bb:cc:dd:ee:ff) "
                           "or IPv4 (a.b.c.d) literal") from None
    try:
        _check_fits(value, bitwidth, f"{what} {text!r} =")
    except LiteralError:
        raise LiteralError(f"{what} {text!r} does not fit in bit<{bitwidth}> "
                           f"(0..{_show(2**bitwidth - 1)})") from None
    return value


def parse_match(text: str, kind: MatchKind, bitwidth: int, field: str) -> Match:
    """A key literal for a field of `kind`, in simple_switch_CLI's syntax."""
    what = f"key field {field!r}"
    full = (1 << bitwidth) - 1
    if kind is MatchKind.EXACT:
        _reject_operators(text, what, "an exact value")
        return Exact(parse_int(text, bitwidth, what))
    if kind is MatchKind.OPTIONAL:
        if text.strip() == "*":
            return Optional(None)
        _reject_operators(text, what, "an optional value (or *)")
        return Optional(parse_int(text, bitwidth, what))
    if kind is MatchKind.LPM:
        if "/" not in text:
            # A bare value is a full-length prefix, as in simple_switch_CLI.
            return Lpm(parse_int(text, bitwidth, what), bitwidth)
        value_text, _, len_text = text.rpartition("/")
        if not len_text.isdigit() or int(len_text) > bitwidth:
            raise LiteralError(f"{what}: prefix length {len_text!r} in {text!r} must be "
                               f"0..{bitwidth}")
        plen = int(len_text)
        mask = full ^ ((1 << (bitwidth - plen)) - 1)
        # Host bits beyond the prefix are cleared rather than refused: `10.0.0.1/24` means the
        # /24 that contains it, and the server must never see them (spec §9.1.1).
        return Lpm(parse_int(value_text, bitwidth, what) & mask, plen)
    if kind is MatchKind.TERNARY:
        if "&&&" not in text:
            # A bare value matches exactly (mask all ones).
            return Ternary(parse_int(text, bitwidth, what), full)
        value_text, _, mask_text = text.partition("&&&")
        mask = parse_int(mask_text, bitwidth, f"{what} mask")
        return Ternary(parse_int(value_text, bitwidth, what) & mask, mask)
    if kind is MatchKind.RANGE:
        if "->" not in text:
            raise LiteralError(f"{what}: range {text!r} must be written lo->hi")
        lo_text, _, hi_text = text.partition("->")
        low = parse_int(lo_text, bitwidth, f"{what} low end")
        high = parse_int(hi_text, bitwidth, f"{what} high end")
        if low > high:
            raise LiteralError(f"{what}: range {text!r} is empty (low end above high end)")
        return Range(low, high)
    raise LiteralError(f"{what}: match kind {kind.label} is not supported")


def _reject_operators(text: str, what: str, expected: str) -> None:
    for op, name in (("&&&", "ternary"), ("->", "range"), ("/", "lpm")):
        if op in text:
            raise LiteralError(f"{what} takes {expected}, not a {name} literal {text!r}")


def is_dont_care(match: Match, bitwidth: int) -> bool:
    """True for a match that P4Runtime represents by omitting the field (spec §9.1.1)."""
    if isinstance(match, Lpm):
        return match.prefix_len == 0
    if isinstance(match, Ternary):
        return match.mask == 0
    if isinstance(match, Range):
        return match.low == 0 and match.high == (1 << bitwidth) - 1
    if isinstance(match, Optional):
        return match.value is None
    return False


_ADDRESS_HINTS = ("addr", "ip", "tpa", "spa", "dst", "src")


def format_int(value: int, bitwidth: int, name: str = "") -> str:
    """An int the way a user would write it back: MAC for 48 bits, IPv4 for a 32-bit field
    whose name says address (`dstAddr`, `tpa`, ...), else decimal when small, hex otherwise.
    Every form parses back with `parse_int`."""
    if bitwidth == 48:
        raw = value.to_bytes(6, "big")
        return ":".join(f"{b:02x}" for b in raw)
    short = name.rsplit(".", 1)[-1].lower()
    if bitwidth == 32 and any(h in short for h in _ADDRESS_HINTS):
        return str(ipaddress.IPv4Address(value))
    return str(value) if value < 1024 else hex(value)


def format_match(match: Match, bitwidth: int, name: str = "") -> str:
    """A match in the literal syntax `parse_match` accepts (round-trips)."""
    def f(v: int) -> str:
        return format_int(v, bitwidth, name)
    if isinstance(match, Exact):
        return f(match.value)
    if isinstance(match, Lpm):
        return f"{f(match.value)}/{match.prefix_len}"
    if isinstance(match, Ternary):
        return f"{f(match.value)}&&&{f(match.mask)}"
    if isinstance(match, Range):
        return f"{f(match.low)}->{f(match.high)}"
    return "*" if match.value is None else f(match.value)
