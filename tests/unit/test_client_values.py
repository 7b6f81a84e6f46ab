"""Literal parsing and canonical byte strings (P4Runtime spec §8.4, §9.1.1)."""
from __future__ import annotations

import pytest

from netsum.match import Exact, Lpm, MatchKind, Optional, Range, Ternary
from netsum.p4rt import values
from netsum.p4rt.errors import LiteralError


@pytest.mark.parametrize("value, width, raw", [
    (0, 8, b"\x00"), (1, 9, b"\x01"), (0x1FF, 9, b"\x01\xff"), (0x0A000001, 32, b"\x0a\x00\x00\x01"),
    (0x100, 16, b"\x01\x00"), (2**48 - 1, 48, b"\xff" * 6),
])
def test_encode_is_canonical_and_round_trips(value: int, width: int, raw: bytes) -> None:
    assert values.encode(value, width) == raw
    assert values.decode(raw, width) == value
    assert values.decode(b"\x00\x00" + raw, width) == value   # zero-padded is accepted


@pytest.mark.parametrize("value, width", [(512, 9), (-1, 8), (2**32, 32)])
def test_encode_refuses_what_does_not_fit(value: int, width: int) -> None:
    with pytest.raises(LiteralError, match=f"bit<{width}>"):
        values.encode(value, width)


def test_decode_refuses_too_wide_and_empty() -> None:
    with pytest.raises(LiteralError):
        values.decode(b"\x02\x00", 9)
    with pytest.raises(LiteralError, match="empty"):
        values.decode(b"", 8)


@pytest.mark.parametrize("text, width, want", [
    ("42", 8, 42), ("0x2a", 8, 42), ("0X2A", 16, 42), ("0b101", 3, 5),
    ("00:11:22:33:44:55", 48, 0x001122334455), ("0:1:2:3:4:5", 48, 0x000102030405),
    ("10.0.0.1", 32, 0x0A000001), ("255.255.255.255", 32, 2**32 - 1),
])
def test_parse_int(text: str, width: int, want: int) -> None:
    assert values.parse_int(text, width) == want


@pytest.mark.parametrize("text, width, fragment", [
    ("256", 8, "does not fit in bit<8>"), ("0x1ff", 8, "does not fit"),
    ("10.0.0.256", 32, "not a number"), ("00:11:22:33:44", 48, "not a number"),
    ("abc", 8, "not a number"), ("", 8, "not a number"), ("-3", 8, "does not fit"),
    ("10.0.0.1", 16, "does not fit in bit<16>"),
])
def test_parse_int_errors(text: str, width: int, fragment: str) -> None:
    with pytest.raises(LiteralError, match=fragment):
        values.parse_int(text, width)


@pytest.mark.parametrize("text, kind, width, want", [
    ("7", MatchKind.EXACT, 9, Exact(7)),
    ("10.0.0.0/8", MatchKind.LPM, 32, Lpm(0x0A000000, 8)),
    ("10.1.2.3/16", MatchKind.LPM, 32, Lpm(0x0A010000, 16)),      # host bits cleared
    ("10.1.2.3", MatchKind.LPM, 32, Lpm(0x0A010203, 32)),
    ("0x0a&&&0x0f", MatchKind.TERNARY, 8, Ternary(0x0A, 0x0F)),
    ("0xff&&&0x0f", MatchKind.TERNARY, 8, Ternary(0x0F, 0x0F)),   # value masked
    ("5", MatchKind.TERNARY, 8, Ternary(5, 0xFF)),
    ("1->10", MatchKind.RANGE, 9, Range(1, 10)),
    ("*", MatchKind.OPTIONAL, 8, Optional(None)),
    ("3", MatchKind.OPTIONAL, 8, Optional(3)),
])
def test_parse_match(text: str, kind: MatchKind, width: int, want: values.Match) -> None:
    got = values.parse_match(text, kind, width, "f")
    assert got == want
    # What format_match prints parses back to the same match.
    assert values.parse_match(values.format_match(got, width), kind, width, "f") == got


@pytest.mark.parametrize("text, kind, width, fragment", [
    ("1/8", MatchKind.EXACT, 9, "not a lpm literal"),
    ("1&&&1", MatchKind.EXACT, 9, "not a ternary literal"),
    ("10.0.0.0/33", MatchKind.LPM, 32, "prefix length '33'"),
    ("10.0.0.0/x", MatchKind.LPM, 32, "prefix length"),
    ("5", MatchKind.RANGE, 9, "lo->hi"),
    ("10->1", MatchKind.RANGE, 9, "empty"),
    ("1->600", MatchKind.RANGE, 9, "high end"),
    ("1&&&0x1ff", MatchKind.TERNARY, 8, "mask"),
])
def test_parse_match_errors(text: str, kind: MatchKind, width: int, fragment: str) -> None:
    with pytest.raises(LiteralError, match=fragment):
        values.parse_match(text, kind, width, "f")


@pytest.mark.parametrize("match, dont_care", [
    (Lpm(0, 0), True), (Lpm(0, 1), False), (Ternary(0, 0), True), (Ternary(0, 1), False),
    (Range(0, 255), True), (Range(0, 254), False), (Optional(None), True), (Exact(0), False),
])
def test_dont_care(match: values.Match, dont_care: bool) -> None:
    assert values.is_dont_care(match, 8) is dont_care


@pytest.mark.parametrize("value, width, name, text", [
    (0x0A000001, 32, "hdr.ipv4.srcAddr", "10.0.0.1"), (0x0A000001, 32, "up_addr", "10.0.0.1"),
    (1 << 20, 32, "worker_bit", "0x100000"), (0x0200000000FF, 48, "dst_mac", "02:00:00:00:00:ff"),
    (7, 9, "port", "7"), (4097, 16, "mgid", "0x1001"),
])
def test_format_int_reads_like_the_field(value: int, width: int, name: str, text: str) -> None:
    assert values.format_int(value, width, name) == text
    assert values.parse_int(text, width) == value
