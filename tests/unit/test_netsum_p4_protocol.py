"""netsum.p4 and netsum/wire/ describe the same wire format, field by field.

Two independent readings of the P4 side: the source text (header declaration and constants) and
the compiled BMv2 JSON (`header_types`, the parser's select on the UDP port), for every K.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from netsum import wire as protocol

P4_SOURCE = Path(__file__).resolve().parents[2] / "p4" / "netsum.p4"


def _source() -> str:
    return P4_SOURCE.read_text()


def _header_fields(text: str, header: str) -> list[tuple[str, int]]:
    m = re.search(r"\bheader\s+" + re.escape(header) + r"\s*\{(.*?)\}", text, re.S)
    assert m, f"no `header {header}` in {P4_SOURCE}"
    body = re.sub(r"/\*.*?\*/|//[^\n]*", "", m.group(1), flags=re.S)
    fields = re.findall(r"bit\s*<\s*(\d+)\s*>\s*(\w+)\s*;", body)
    leftover = re.sub(r"bit\s*<\s*\d+\s*>\s*\w+\s*;", "", body).strip()
    assert not leftover, f"unexpected text in header {header}: {leftover!r}"
    return [(name, int(bits)) for bits, name in fields]


def _const(text: str, name: str) -> tuple[int, int]:
    m = re.search(r"\bconst\s+bit\s*<\s*(\d+)\s*>\s*" + re.escape(name) + r"\s*=\s*(\w+)\s*;", text)
    assert m, f"no `const bit<W> {name}` in {P4_SOURCE}"
    return int(m.group(1)), int(m.group(2), 0)


def test_header_declaration_matches_protocol_fields() -> None:
    declared = _header_fields(_source(), "netsum_t")
    expected = [(f.name, f.bits) for f in protocol.HEADER_FIELDS]
    assert declared == expected


def test_header_is_whole_bytes_and_sized_as_protocol() -> None:
    declared = _header_fields(_source(), "netsum_t")
    assert sum(b for _, b in declared) == protocol.HEADER_BYTES * 8


@pytest.mark.parametrize("name, width, value", [
    ("NETSUM_UDP_PORT", 16, protocol.UDP_PORT),
    ("MSG_DATA", 8, int(protocol.MsgType.DATA)),
    ("MSG_RESULT", 8, int(protocol.MsgType.RESULT)),
    ("MSG_STATUS", 8, int(protocol.MsgType.STATUS)),
    ("MSG_REJECT", 8, int(protocol.MsgType.REJECT)),
    ("FLAG_RETX", 8, int(protocol.Flags.RETX)),
    ("FLAG_NONFINITE", 8, int(protocol.Flags.NONFINITE)),
    ("FLAG_ACK", 8, int(protocol.Flags.ACK)),
    ("DEST_ALL", 8, protocol.DEST_ALL),
    ("RANK_SWITCH", 8, protocol.RANK_SWITCH),
])
def test_constants_match_protocol(name: str, width: int, value: int) -> None:
    assert _const(_source(), name) == (width, value)


def test_every_message_type_is_a_p4_constant() -> None:
    """A message type added to wireformat needs its MSG_ constant in the program (and back)."""
    declared = {m.group(1): int(m.group(2), 0) for m in re.finditer(
        r"\bconst\s+bit\s*<\s*8\s*>\s*MSG_(\w+)\s*=\s*(\w+)\s*;", _source())}
    assert declared == {m.name: int(m) for m in protocol.MsgType}


def test_default_k_matches_protocol() -> None:
    m = re.search(r"#ifndef\s+NETSUM_K\s*\n\s*#define\s+NETSUM_K\s+(\d+)", _source())
    assert m, "netsum.p4 must default NETSUM_K under #ifndef so -DNETSUM_K overrides it"
    assert int(m.group(1)) == protocol.K_DEFAULT


def test_every_supported_k_has_a_value_list() -> None:
    text = _source()
    for k in protocol.K_SUPPORTED:
        assert re.search(r"#(el)?if\s+NETSUM_K\s*==\s*" + str(k) + r"\b", text), k


def test_register_slot_count_fits_the_header() -> None:
    m = re.search(r"#ifndef\s+NETSUM_SLOTS\s*\n\s*#define\s+NETSUM_SLOTS\s+(\d+)", _source())
    assert m
    assert int(m.group(1)) <= protocol.MAX_SLOTS


# ---- the compiled program (what the switch actually runs) ----

@pytest.mark.parametrize("k", protocol.K_SUPPORTED)
def test_compiled_header_types_match_protocol(k: int) -> None:
    from netsum.build import ensure_built

    doc = json.loads(ensure_built(k)[0].read_text())
    types = {t["name"]: t["fields"] for t in doc["header_types"]}
    assert [(name, bits) for name, bits, *_ in types["netsum_t"]] == [
        (f.name, f.bits) for f in protocol.HEADER_FIELDS]
    values = types["values_t"]
    assert len(values) == k and all(bits == 32 for _, bits, *_ in values)
    # the parser enters the netsum header exactly on the protocol's UDP port
    states = {s["name"]: s for p in doc["parsers"] for s in p["parse_states"]}
    to_netsum = [t for t in states["parse_udp"]["transitions"] if t["next_state"] == "parse_netsum"]
    assert [int(t["value"], 16) for t in to_netsum] == [protocol.UDP_PORT]
    assert states["parse_udp"]["transition_key"] == [{"type": "field",
                                                      "value": ["udp", "dstPort"]}]


def test_every_refusal_reason_is_a_p4_constant() -> None:
    """Each wire Reason (but NONE) has its REASON_ constant in the program, same value."""
    declared = {m.group(1): int(m.group(2), 0) for m in re.finditer(
        r"\bconst\s+bit\s*<\s*8\s*>\s*REASON_(\w+)\s*=\s*(\w+)\s*;", _source())}
    assert declared == {r.name: int(r) for r in protocol.Reason if r is not protocol.Reason.NONE}


def test_header_only_lengths_and_klog2_per_k() -> None:
    """The header-only REJECT/ACK lengths the program writes start from the wire's header size,
    and each K branch defines the log2 K its REJECT(K) returns."""
    assert _const(_source(), "NETSUM_HEADER_BYTES") == (16, protocol.HEADER_BYTES)
    branches = re.findall(r"#(?:el)?if\s+NETSUM_K\s*==\s*(\d+)\s*\n\s*#define\s+NS_KLOG2\s+(\d+)",
                          _source())
    assert {int(k): int(v) for k, v in branches} == {k: protocol.klog2(k)
                                                     for k in protocol.K_SUPPORTED}
