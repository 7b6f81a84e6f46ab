"""pkt.lookahead<T>() in parser states: as a select key or the right side of an assignment it
becomes BMv2's ``lookahead`` [offset, width] (a field or a slice of it narrows the window, as
p4c emits); inside a larger expression it is read into a temporary first; into a header each
field is set from its own window; what BMv2 cannot do is a positioned ``unsupported
construct`` error, never an internal error."""
from __future__ import annotations

from typing import Any

import pytest

from netsum import p4c as compiler
from netsum.switch.device import Device

PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; }
struct metadata { bit<8> m8; bit<16> m16; bool flag; }
struct headers { h_t h; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { STATE }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
SEL = " { 1: accept; default: accept; }"


def start_state(state: str) -> dict[str, Any]:
    doc = compiler.compile_source(PROGRAM.replace("STATE", state), "la.p4").bmv2_json
    st: dict[str, Any] = doc["parsers"][0]["parse_states"][0]
    return st


def LA(offset: int, width: int) -> dict[str, Any]:
    return {"type": "lookahead", "value": [offset, width]}


@pytest.mark.parametrize("key,expected,first", [
    ("pkt.lookahead<bit<24>>()[7:0]", [LA(16, 8)], "0x01"),
    ("pkt.lookahead<bit<24>>()[23:16]", [LA(0, 8)], "0x01"),
    ("pkt.lookahead<bit<24>>()[0:0]", [LA(23, 1)], "0x01"),
    ("pkt.lookahead<bit<24>>()[15:0][11:4]", [LA(12, 8)], "0x01"),
    ("pkt.lookahead<h_t>().b", [LA(8, 16)], "0x0001"),
    ("pkt.lookahead<h_t>().b[3:0]", [LA(20, 4)], "0x01"),
    ("(bit<8>)pkt.lookahead<bit<8>>()", [LA(0, 8)], "0x01"),
    ("pkt.lookahead<bit<24>>()[7:0], pkt.lookahead<bit<4>>()", [LA(16, 8), LA(0, 4)],
     "0x0102"),
    ("pkt.lookahead<int<8>>()[3:0]", [LA(4, 4)], "0x01"),
])
def test_select_key(key: str, expected: list[dict[str, Any]], first: str) -> None:
    cases = SEL if "," not in key else " { (1, 2): accept; default: accept; }"
    st = start_state(f"transition select({key}){cases}")
    assert st["transition_key"] == expected
    assert st["transitions"][0]["value"] == first


@pytest.mark.parametrize("stmt,target,window", [
    ("meta.m8 = pkt.lookahead<bit<24>>()[7:0];", "metadata.m8", LA(16, 8)),
    ("meta.m8 = pkt.lookahead<h_t>().b[15:8];", "metadata.m8", LA(8, 8)),
    ("meta.m16 = pkt.lookahead<h_t>().b;", "metadata.m16", LA(8, 16)),
])
def test_assignment(stmt: str, target: str, window: dict[str, Any]) -> None:
    st = start_state(f"{stmt} transition accept;")
    assert st["parser_ops"] == [{"op": "set", "parameters": [
        {"type": "field", "value": ["scalars", target]}, window]}]


def test_signed_lookahead_key_value_is_twos_complement() -> None:
    st = start_state("transition select(pkt.lookahead<int<8>>()) { -1: accept; default: accept; }")
    assert st["transition_key"] == [LA(0, 8)]
    assert st["transitions"][0]["value"] == "0xff"


def test_local_initialised_from_a_slice() -> None:
    st = start_state("bit<8> x = pkt.lookahead<bit<24>>()[7:0]; meta.m8 = x; "
                     "transition accept;")
    first = st["parser_ops"][0]
    assert first["op"] == "set" and first["parameters"][1] == LA(16, 8)




@pytest.mark.parametrize("state,window", [
    (f"transition select(pkt.lookahead<bit<8>>() + 1){SEL}", LA(0, 8)),
    (f"transition select((bit<16>)pkt.lookahead<bit<8>>()){SEL}", LA(0, 8)),
    ("transition select(pkt.lookahead<bit<8>>() == 3) { true: accept; default: accept; }",
     LA(0, 8)),
    (f"transition select(pkt.lookahead<bit<4>>() ++ pkt.lookahead<bit<4>>()){SEL}", LA(0, 4)),
    (f"transition select(meta.flag ? pkt.lookahead<bit<8>>() : 8w0){SEL}", LA(0, 8)),
    ("meta.m8 = pkt.lookahead<bit<8>>() + 1; transition accept;", LA(0, 8)),
    ("meta.m16 = (bit<16>)pkt.lookahead<bit<8>>(); transition accept;", LA(0, 8)),
    ("meta.flag = pkt.lookahead<bit<1>>() == 1; transition accept;", LA(0, 1)),
    ("verify(pkt.lookahead<bit<8>>() == 1, error.NoMatch); transition accept;", LA(0, 8)),
    ("pkt.advance((bit<32>)pkt.lookahead<bit<8>>()); transition accept;", LA(0, 8)),
    ("meta.m8 = pkt.lookahead<h_t>().b[7:0] + 1; transition accept;", LA(16, 8)),
    # an if in a state becomes a select on its condition (SplitParserIfs)
    ("if (pkt.lookahead<bit<8>>() == 1) { meta.m8 = 1; } transition accept;", LA(0, 8)),
])
def test_lookahead_inside_an_expression_is_read_first(state: str,
                                                      window: dict[str, Any]) -> None:
    """Read into a temporary by its own `set` right before the statement (or the select)
    that uses it: nothing is extracted in between, so the same bits are read."""
    ops = start_state(state)["parser_ops"]
    assert ops[0]["op"] == "set" and ops[0]["parameters"][1] == window
    assert ops[0]["parameters"][0]["value"][0] == "scalars"


# The caret goes under `marker` (its first occurrence in the state's text).
@pytest.mark.parametrize("state,marker,message", [
    ("meta.m16 = pkt.lookahead<bit<8>>(); transition accept;", "=",
     "type mismatch in assignment: expected bit<16>, got bit<8>"),
    ("meta.m16[7:0] = pkt.lookahead<bit<8>>(); transition accept;", "=",
     "unsupported construct: lookahead into this target"),
    ("transition select(pkt.lookahead<h_t>()) { default: accept; }", "lookahead",
     "unsupported construct: select key of type h_t"),
    ("transition select(pkt.lookahead<bool>()) { default: accept; }", "lookahead",
     "unsupported construct: lookahead of bool"),
    (f"transition select(pkt.lookahead<bit<24>>()[24:0]){SEL}", "[24:0]",
     "slice [24:0] out of range for bit<24>"),
])
def test_unsupported_forms_are_positioned_errors(state: str, marker: str, message: str) -> None:
    col = len("    state start { ") + state.index(marker) + 1
    with pytest.raises(compiler.CompileError) as info:
        start_state(state)
    text = str(info.value)
    assert text.startswith(f"la.p4:7:{col}: error: {message}"), text
    assert "Traceback" not in text and "internal" not in text


HEADER_LOOKAHEAD = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
header f_t { bit<8> f; }
struct pair { bit<4> x; bit<4> y; }
struct two { f_t[2] s; }
struct metadata { }
struct headers { h_t h; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        h_t peek = pkt.lookahead<h_t>();
        bit<4> y = pkt.lookahead<pair>().y;
        two t;
        t = pkt.lookahead<two>();
        pkt.extract(hdr.h);
        hdr.h.a = peek.b;
        hdr.h.b = (bit<8>)y + t.s[1].f;
        transition accept;
    }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_lookahead_into_a_header_and_a_struct_member() -> None:
    """issue3702-bmv2 (`ipv4_t ipv4 = pkt.lookahead<ipv4_t>();`) and issue561-bmv2
    (`pkt.lookahead<S>().length`, S a struct of bit strings): the header becomes valid with
    each field read at its offset; a struct member reads its own bits; issue2465-bmv2: a
    struct holding a header stack, every element valid and filled in order.  By hand: for
    the bytes 12 34, peek = {a: 0x12, b: 0x34}, y is the low nibble of 0x12 and t.s[1].f is
    0x34, so h.b = 2 + 0x34."""
    res = compiler.compile_source(HEADER_LOOKAHEAD, "la_header.p4")
    ops = res.bmv2_json["parsers"][0]["parse_states"][0]["parser_ops"]
    sets = [o["parameters"][1] for o in ops if o["op"] == "set"][:5]
    assert sets == [LA(0, 8), LA(8, 8), LA(4, 4), LA(0, 8), LA(8, 8)]
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    assert d.process(0, bytes([0x12, 0x34])) == [(1, bytes([0x34, 0x36]))]
