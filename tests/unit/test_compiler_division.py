"""Run-time `/` and `%` on unsigned values, as p4c-bm2-ss emits them: BMv2's own "/" and "%"
expression operators (behavioral-model's ExprOpcode DIV/MOD), the result masked to the type's
width like every arithmetic result (p4c's ArithmeticFixup); by a constant power of two a shift
or a mask (p4c's StrengthReduction); signed operands refused as p4c's type checker refuses
them.  Expected packets are worked out by hand (Python's // and % on the same numbers);
p4c's issue2287-bmv2 STF test covers `0 / f(x)` and `0 % f(x)`.

Deliberate miscompiles these tests caught: "%" emitted as "/" and the operands swapped."""
from __future__ import annotations

import pytest

from netsum import p4c as compiler
from netsum.switch.device import Device

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header c_t { bit<16> a; bit<8> b; bit<16> q; bit<8> r; bit<16> q8; bit<16> r8; }
struct hs { c_t c; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.c); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    action divide() {
        h.c.q = h.c.a / (bit<16>)h.c.b;
        h.c.r = (bit<8>)(h.c.a % (bit<16>)h.c.b);
    }
    table t { actions = { divide; } default_action = divide(); }
    apply {
        t.apply();
        h.c.q8 = h.c.a / 8;
        h.c.r8 = h.c.a % 8;
        sm.egress_spec = 1;
    }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.c); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


@pytest.fixture(scope="module")
def res() -> compiler.CompileResult:
    return compiler.compile_source(PROGRAM, "div.p4")


def frame(a: int, b: int, q: int = 0, r: int = 0, q8: int = 0, r8: int = 0) -> bytes:
    return a.to_bytes(2, "big") + bytes([b]) + q.to_bytes(2, "big") + bytes([r]) + \
        q8.to_bytes(2, "big") + r8.to_bytes(2, "big")


@pytest.mark.parametrize("a, b", [(200, 7), (7, 200), (65535, 255), (1000, 1), (12345, 100)])
def test_quotient_and_remainder_on_the_switch(res: compiler.CompileResult, a: int, b: int) -> None:
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    assert d.process(0, frame(a, b)) == [(1, frame(a, b, a // b, a % b, a // 8, a % 8))]


def test_json_is_bmv2_s_operator_masked_as_p4c_emits_it(res: compiler.CompileResult) -> None:
    (act,) = [a for a in res.bmv2_json["actions"] if a["name"] == "I.divide"]
    q, r = act["primitives"][0], act["primitives"][1]
    inner = q["parameters"][1]["value"]["value"]
    assert inner["op"] == "&" and inner["right"] == {"type": "hexstr", "value": "0xffff"}
    assert inner["left"]["value"]["op"] == "/"
    assert inner["left"]["value"]["left"] == {"type": "field", "value": ["c", "a"]}
    # (bit<8>)(a % b): the cast's mask around the remainder's own.
    mod = r["parameters"][1]["value"]["value"]["left"]["value"]
    assert mod["op"] == "&" and mod["right"]["value"] == "0xffff"
    assert mod["left"]["value"]["op"] == "%"
    # By 8: a shift and a mask, no division at run time.
    text = str(res.bmv2_json["actions"])
    assert text.count("'/'") == 1 and text.count("'%'") == 1


@pytest.mark.parametrize("expr", ["(int<8>)h.c.b / 3", "(int<8>)h.c.b % (int<8>)h.c.r"])
def test_signed_operands_are_refused(expr: str) -> None:
    src = PROGRAM.replace("h.c.r8 = h.c.a % 8;", f"h.c.r8 = (bit<16>)(bit<8>)({expr});")
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile_source(src, "div.p4")
    assert "cannot operate on signed values" in str(info.value)
