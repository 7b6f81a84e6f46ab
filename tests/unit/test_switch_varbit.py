"""Variable-length (varbit) fields: `extract_VL`, emit at the extracted width, `assign_VL`,
whole-header copies, comparisons, checksums over a varbit field, and the three parser errors
of bmv2's extract_VL; also a checksum over the payload (the other input whose length varies).
Hand-written JSON in p4c's shapes (a header type with one `"*"` field and `max_length` in
bytes; extract_VL's second parameter an expression of the length in bits).

Program: `lenh` (n: bit<8>), then `h` (len: bit<8>, opts: varbit<32>, tail: bit<8>) extracted
with opts `n * 4` bits wide, then `ck` (c: bit<16>).  Ingress: `v = h.opts` (a varbit local,
p4c's `struct$varbit32` metadata header), `h.tail = h.tail + 1`, `h2 = h` (a second header of
h's type), egress_spec = parser_error << 1 | (v == h.opts).  ck.c is updated with csum16 over
(h.opts, h.tail).  Expected frames are worked out by hand below.
"""
from __future__ import annotations

from typing import Any

import pytest

from bmv2json import F, expr, hexstr, prim, program
from netsum.switch.device import Device
from netsum.switch.errors import ConfigError

NO_ERROR, TOO_SHORT, HDR_TOO_SHORT, BAD_ARG = 0, 1, 4, 6


def _doc() -> dict[str, Any]:
    length = expr("<<", F("lenh", "n"), hexstr(2))           # n * 4 bits
    doc = program(
        header_types=[{"name": "lenh_t", "fields": [["n", 8, False]]},
                      {"name": "hdr_t", "fields": [["len", 8, False], ["opts", "*"],
                                                   ["tail", 8, False]], "max_length": 6},
                      {"name": "ck_t", "fields": [["c", 16, False]]},
                      {"name": "struct$varbit32", "fields": [["field", "*"]], "max_length": 4}],
        headers=[{"name": "lenh", "header_type": "lenh_t"},
                 {"name": "h", "header_type": "hdr_t"},
                 {"name": "h2", "header_type": "hdr_t"},
                 {"name": "ck", "header_type": "ck_t"},
                 {"name": "v", "header_type": "struct$varbit32", "metadata": True}],
        parse_states=[{"name": "start", "transition_key": [], "transitions": [
            {"type": "default", "value": None, "mask": None, "next_state": None}],
            "parser_ops": [
                {"op": "extract", "parameters": [{"type": "regular", "value": "lenh"}]},
                {"op": "extract_VL", "parameters": [{"type": "regular", "value": "h"}, length]},
                {"op": "extract", "parameters": [{"type": "regular", "value": "ck"}]}]}],
        actions=[[prim("assign_VL", F("v", "field"), F("h", "opts")),
                  prim("assign", F("h", "tail"),
                       expr("&", expr("+", F("h", "tail"), hexstr(1)), hexstr(0xFF), 2)),
                  prim("assign_header", {"type": "header", "value": "h2"},
                       {"type": "header", "value": "h"}),
                  prim("assign", F("standard_metadata", "egress_spec"), expr(
                      "|", expr("<<", F("standard_metadata", "parser_error"), hexstr(1)),
                      expr("b2d", None, expr("==", F("v", "field"), F("h", "opts"))), 2))]],
        deparse=["lenh", "h", "h2", "ck"])
    doc["calculations"] = [{"name": "calc", "id": 0, "algo": "csum16", "input": [
        F("h", "opts"), F("h", "tail")]}]
    doc["checksums"] = [{"name": "cksum", "id": 0, "target": ["ck", "c"], "type": "generic",
                         "calculation": "calc", "verify": False, "update": True,
                         "if_cond": None}]
    return doc


@pytest.fixture(scope="module")
def dev() -> Device:
    d = Device()
    d.install(Device.build_pipeline(_doc()))
    return d


def csum16(data: bytes) -> int:
    """RFC 1071 one's complement sum, written out word by word (shares nothing with the
    switch's calculation code)."""
    data += b"\x00" * (len(data) % 2)
    total = 0
    for i in range(0, len(data), 2):
        total += data[i] << 8 | data[i + 1]
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def test_varbit_field_is_extracted_and_emitted_at_its_width(dev: Device) -> None:
    # n = 4: opts is 16 bits (aa bb); tail cc -> cd; h2 is a copy of h, same width.
    pkt = bytes([4, 0x11, 0xAA, 0xBB, 0xCC, 0, 0, 0xEE])
    h = bytes([0x11, 0xAA, 0xBB, 0xCD])
    ck = csum16(bytes([0xAA, 0xBB, 0xCD])).to_bytes(2, "big")
    assert dev.process(3, pkt) == [(1, bytes([4]) + h + h + ck + bytes([0xEE]))]


def test_empty_and_full_varbit_fields(dev: Device) -> None:
    # n = 0: no opts bytes at all
    pkt = bytes([0, 0x11, 0xCC, 0, 0])
    h = bytes([0x11, 0xCD])
    assert dev.process(3, pkt) == [(1, bytes([0]) + h + h + csum16(bytes([0xCD])).to_bytes(
        2, "big"))]
    # n = 8: opts takes the whole 32 bits max_length leaves (6 bytes in all)
    pkt = bytes([8, 0x11, 1, 2, 3, 4, 0xCC, 0, 0])
    h = bytes([0x11, 1, 2, 3, 4, 0xCD])
    ck = csum16(bytes([1, 2, 3, 4, 0xCD])).to_bytes(2, "big")
    assert dev.process(3, pkt) == [(1, bytes([8]) + h + h + ck)]


@pytest.mark.parametrize("n, rest, error", [
    (1, bytes(8), BAD_ARG),              # 4 bits: not a multiple of 8
    (10, bytes(12), HDR_TOO_SHORT),      # 40 bits: 7 bytes > max_length 6
    (8, bytes(3), TOO_SHORT),            # 32 bits, but only 3 bytes left
])
def test_extract_vl_errors(dev: Device, n: int, rest: bytes, error: int) -> None:
    # The error goes to parser_error and the packet goes on (v1model); h stays invalid, so
    # only lenh is emitted, followed by the unparsed bytes.  v and h.opts both read 0.
    assert dev.process(3, bytes([n]) + rest) == [(error << 1 | 1, bytes([n]) + rest)]


def test_a_varbit_header_needs_extract_vl() -> None:
    doc = _doc()
    ops = doc["parsers"][0]["parse_states"][0]["parser_ops"]
    ops[1] = {"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}
    with pytest.raises(ConfigError, match="needs extract_VL"):
        Device.build_pipeline(doc)


def test_varbit_field_wider_than_max_length_allows_is_refused() -> None:
    doc = _doc()
    doc["header_types"][2]["max_length"] = 2            # 2 bytes, 16 fixed bits
    with pytest.raises(ConfigError, match="max_length 2 leaves 0 bits"):
        Device.build_pipeline(doc)


def test_checksum_with_payload() -> None:
    # update_checksum_with_payload / verify_checksum_with_payload (p4c: a `payload` element
    # last in the calculation's input): the fields' bytes, then the packet's unparsed bytes.
    doc = program(
        header_types=[{"name": "h_t", "fields": [["a", 16, False], ["ck", 16, False]]}],
        headers=[{"name": "h", "header_type": "h_t"}],
        parse_states=[{"name": "start", "transition_key": [], "transitions": [
            {"type": "default", "value": None, "mask": None, "next_state": None}],
            "parser_ops": [{"op": "extract", "parameters": [{"type": "regular",
                                                              "value": "h"}]}]}],
        actions=[[prim("assign", F("standard_metadata", "egress_spec"),
                       F("standard_metadata", "checksum_error"))]], deparse=["h"])
    doc["calculations"] = [{"name": "calc", "id": 0, "algo": "csum16", "input": [
        F("h", "a"), {"type": "payload", "value": None}]}]
    doc["checksums"] = [{"name": "cksum", "id": 0, "target": ["h", "ck"], "type": "generic",
                         "calculation": "calc", "verify": True, "update": True,
                         "if_cond": None}]
    dev = Device()
    dev.install(Device.build_pipeline(doc))
    good = csum16(b"\x12\x34abc").to_bytes(2, "big")
    assert dev.process(1, b"\x12\x34" + good + b"abc") == [(0, b"\x12\x34" + good + b"abc")]
    # a wrong checksum: checksum_error is set, and the update writes the right one
    assert dev.process(1, b"\x12\x34\x00\x00abc") == [(1, b"\x12\x34" + good + b"abc")]
