"""Lowering rules one statement at a time: p4c's ArithmeticFixup masks, hexstr padding,
wrapping, `if` inside actions as jumps, extern primitives, parser select encoding."""
from __future__ import annotations

from typing import Any

import pytest

from netsum import p4c as compiler
from netsum.p4c.cli import main
from netsum.p4c.lower_parser import range_to_masks

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<16> c; bit<32> d; int<8> s; bit<1> f; }
struct metadata { bit<8> m; bit<32> w; bit<32> idx; bool flag; @field_list(1) bit<8> keep; }
struct headers { h_t h; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition SELECT }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<32>>(8) r;
    counter(8, CounterType.packets) c;
    meter(8, MeterType.packets) mt;
    action act(bit<8> p, bool q) { BODY }
    table t { key = { hdr.h.a: exact; } actions = { act; } default_action = act(0, false); }
    apply { t.apply(); }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def compile_body(body: str, select: str = "accept;") -> dict[str, Any]:
    src = PROGRAM.replace("BODY", body).replace("SELECT", select)
    return compiler.compile_source(src, "t.p4").bmv2_json


def prims(body: str) -> list[dict[str, Any]]:
    doc = compile_body(body)
    return next(a for a in doc["actions"] if a["name"] == "I.act")["primitives"]


def F(h: str, f: str) -> dict[str, Any]:
    return {"type": "field", "value": [h, f]}


def H(v: str) -> dict[str, Any]:
    return {"type": "hexstr", "value": v}


def E(op: str, left: Any, right: Any) -> dict[str, Any]:
    return {"type": "expression", "value": {"op": op, "left": left, "right": right}}


def P(e: dict[str, Any]) -> dict[str, Any]:
    """A primitive parameter: expressions wrapped twice."""
    return {"type": "expression", "value": e}


@pytest.mark.parametrize("body,expected", [
    ("hdr.h.a = hdr.h.a + hdr.h.b;", P(E("&", E("+", F("h", "a"), F("h", "b")), H("0xff")))),
    ("hdr.h.d = hdr.h.d - 1;", P(E("&", E("+", F("h", "d"), H("0xffffffff")), H("0xffffffff")))),
    ("hdr.h.c = hdr.h.c & 0xF;", P(E("&", F("h", "c"), H("0x000f")))),
    ("hdr.h.a = hdr.h.a << 2;", P(E("&", E("<<", F("h", "a"), H("0x2")), H("0xff")))),
    ("hdr.h.a = ~hdr.h.b;",
     P(E("&", {"type": "expression", "value": {"op": "~", "left": None,
                                               "right": F("h", "b")}}, H("0xff")))),
    ("hdr.h.c = (bit<16>)hdr.h.a;", P(E("&", F("h", "a"), H("0xffff")))),
    ("hdr.h.a = hdr.h.d[15:8];", P(E("&", E(">>", F("h", "d"), H("0x8")), H("0xff")))),
    ("hdr.h.a = hdr.h.d[7:0];", P(E("&", F("h", "d"), H("0xff")))),
    ("hdr.h.s = hdr.h.s + 1;", P(E("two_comp_mod", E("+", F("h", "s"), H("0x01")), H("0x8")))),
    ("hdr.h.a = hdr.h.a |+| hdr.h.b;",
     P(E("usat_cast", E("+", F("h", "a"), F("h", "b")), H("0x8")))),
    ("hdr.h.a = p;", {"type": "runtime_data", "value": 0}),
    ("hdr.h.a = p + 1;", P(E("&", E("+", {"type": "local", "value": 0}, H("0x01")), H("0xff")))),
    ("hdr.h.c = 0x800;", H("0x0800")),
    ("hdr.h.d = 5;", H("0x00000005")),
    ("meta.flag = hdr.h.a == 1;",
     P(E("b2d", None, E("==", F("h", "a"), H("0x01"))))),
    ("hdr.h.f = (bit<1>)hdr.h.isValid();",
     P(E("b2d", None, E("d2b", None, F("h", "$valid$"))))),
])
def test_assignment_lowering(body: str, expected: dict[str, Any]) -> None:
    ps = prims(body)
    assert ps[-1]["op"] == "assign"
    assert ps[-1]["parameters"][1] == expected


def test_bool_action_parameter_is_converted() -> None:
    ps = prims("if (q) { hdr.h.b = 1; } meta.flag = q;")
    local = {"type": "local", "value": 1}
    assert ps[0]["parameters"][0] == P(E("b2d", None, E("d2b", None, local)))
    assert ps[-1]["parameters"] == [F("scalars", "metadata.flag"),
                                    {"type": "runtime_data", "value": 1}]


def test_if_in_action_becomes_jumps() -> None:
    ps = prims("if (hdr.h.a == 1) { hdr.h.b = 1; } else { hdr.h.b = 2; hdr.h.c = 3; } "
               "hdr.h.d = 4;")
    assert [p["op"] for p in ps] == ["_jump_if_zero", "assign", "_jump", "assign", "assign",
                                     "assign"]
    assert ps[0]["parameters"][1] == H("0x3")
    assert ps[0]["parameters"][0] == P(E("b2d", None, E("==", F("h", "a"), H("0x01"))))
    assert ps[2]["parameters"] == [H("0x5")]


def test_return_and_exit_jump_to_the_end() -> None:
    ps = prims("if (hdr.h.a == 0) { return; } hdr.h.b = 1; if (hdr.h.b == 1) { exit; } "
               "hdr.h.c = 2;")
    ops = [p["op"] for p in ps]
    assert ops == ["_jump_if_zero", "_jump", "assign", "_jump_if_zero", "exit", "_jump", "assign"]
    assert ps[1]["parameters"] == [H("0x7")] and ps[5]["parameters"] == [H("0x7")]


@pytest.mark.parametrize("body,op,params", [
    ("r.read(meta.w, 3);", "register_read",
     [F("scalars", "metadata.w"), {"type": "register_array", "value": "I.r"}, H("0x00000003")]),
    ("r.write((bit<32>)hdr.h.a, hdr.h.d);", "register_write",
     [{"type": "register_array", "value": "I.r"}, F("scalars", "tmp"), F("h", "d")]),
    ("c.count(2);", "count", [{"type": "counter_array", "value": "I.c"}, H("0x00000002")]),
    ("mt.execute_meter(1, meta.m);", "execute_meter",
     [{"type": "meter_array", "value": "I.mt"}, H("0x00000001"), F("scalars", "metadata.m")]),
    ("random(meta.m, 1, 200);", "modify_field_rng_uniform",
     [F("scalars", "metadata.m"), H("0x01"), H("0xc8")]),
    ("mark_to_drop(sm);", "mark_to_drop", [{"type": "header", "value": "standard_metadata"}]),
    ("clone(CloneType.E2E, 5);", "clone_egress_pkt_to_egress", [H("0x00000005"), H("0x1")]),
    ("clone_preserving_field_list(CloneType.I2E, 5, 1);", "clone_ingress_pkt_to_egress",
     [H("0x00000005"), H("0x1")]),
    ("resubmit_preserving_field_list(1);", "resubmit", [H("0x1")]),
    ("recirculate({meta.m});", "recirculate", [H("0x1")]),
    ("truncate(64);", "truncate", [H("0x00000040")]),
    ("hdr.h.setInvalid();", "remove_header", [{"type": "header", "value": "h"}]),
    ('log_msg("a={} b={}", { hdr.h.a, meta.flag });', "log_msg",
     [{"type": "string", "value": "a={} b={}"},
      {"type": "parameters_vector", "value": [F("h", "a"), F("scalars", "metadata.flag")]}]),
    ('log_msg("hello");', "log_msg", [{"type": "string", "value": "hello"},
                                      {"type": "parameters_vector", "value": []}]),
])
def test_extern_primitives(body: str, op: str, params: list[Any]) -> None:
    ps = prims(body)
    assert ps[-1] == {"op": op, "parameters": params}


def test_preserved_field_lists() -> None:
    doc = compile_body("clone_preserving_field_list(CloneType.I2E, 5, 1);")
    assert doc["field_lists"] == [{"id": 1, "name": "field_list1",
                                   "elements": [F("scalars", "metadata.keep")]}]


def test_hash_makes_a_calculation() -> None:
    doc = compile_body("hash(meta.m, HashAlgorithm.crc32, 8w0, { hdr.h.a, hdr.h.c }, 16w256);")
    # In an action p4c materializes the data list into temporaries, then hashes those.
    assert doc["calculations"] == [{"name": "calc_0", "id": 0, "algo": "crc32",
                                    "input": [F("scalars", "tmp"), F("scalars", "tmp_0")]}]
    act = next(a for a in doc["actions"] if a["name"] == "I.act")
    assert act["primitives"][:2] == [
        {"op": "assign", "parameters": [F("scalars", "tmp"), F("h", "a")]},
        {"op": "assign", "parameters": [F("scalars", "tmp_0"), F("h", "c")]}]
    assert act["primitives"][-1]["parameters"][2] == {"type": "calculation", "value": "calc_0"}


def test_known_values_propagate_into_extern_arguments() -> None:
    """p4c copies extern arguments and propagates copies: a field assigned a computed value
    just before is passed through a temporary holding that value; a constant is inlined; a
    write in between (or a join after an if) forgets what was known."""
    ps = prims("meta.w = hdr.h.d & 7; r.read(meta.w, meta.w); meta.idx = 3; r.write(meta.idx, "
               "meta.w); c.count(meta.w);")
    assert ps[1] == {"op": "assign", "parameters": [F("scalars", "tmp"),
                                                   P(E("&", F("h", "d"), H("0x00000007")))]}
    assert ps[2]["parameters"][2] == F("scalars", "tmp")
    assert ps[4]["op"] == "register_write" and ps[4]["parameters"][1] == H("0x00000003")
    assert ps[4]["parameters"][2] == F("scalars", "metadata.w")  # overwritten by the read
    ps = prims("meta.w = hdr.h.d & 7; if (hdr.h.a == 1) { hdr.h.b = 2; } c.count(meta.w);")
    assert ps[-1]["parameters"][1] == F("scalars", "metadata.w")


@pytest.mark.parametrize("lo,hi,width,expected", [
    (0, 0x10, 8, [(0x00, 0xF0), (0x10, 0xFF)]),
    (0, 255, 8, [(0, 0)]),
    (3, 3, 8, [(3, 0xFF)]),
    (1, 6, 4, [(1, 0xF), (2, 0xE), (4, 0xE), (6, 0xF)]),
])
def test_range_to_masks(lo: int, hi: int, width: int, expected: list[tuple[int, int]]) -> None:
    assert range_to_masks(lo, hi, width) == expected
    covered = {v for v in range(1 << width)
               if any(v & m == val for val, m in range_to_masks(lo, hi, width))}
    assert covered == set(range(lo, hi + 1))


@pytest.mark.parametrize("select,transitions", [
    ("select(hdr.h.a) { 1: accept; default: reject; }",
     [("0x01", None), (None, None)]),
    ("select(hdr.h.a, hdr.h.c) { (1, 0x800 &&& 0xF00): accept; (_, 5): accept; }",
     [("0x010800", "0xff0f00"), ("0x000005", "0x00ffff")]),
    ("select(hdr.h.b) { 0 .. 1: accept; }", [("0x00", "0xfe")]),
])
def test_select_encoding(select: str, transitions: list[tuple[str | None, str | None]]) -> None:
    doc = compile_body("hdr.h.a = 1;", select=f"{select}")
    got = [(t["value"], t["mask"]) for t in doc["parsers"][0]["parse_states"][0]["transitions"]]
    assert got == transitions


def test_internal_error_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    import netsum.p4c.cli as cli

    def boom(*_a: object, **_k: object) -> None:
        raise RuntimeError("synthetic failure")

    monkeypatch.setattr(cli, "compile_file", boom)
    assert main(["x.p4"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("netsum-p4c: internal compiler error: RuntimeError: synthetic failure")
    assert "Traceback" not in err


def test_digest_learn_list_and_p4info() -> None:
    src = PROGRAM.replace("BODY", "digest<learn_t>(1, { hdr.h.c, meta.m });") \
        .replace("SELECT", "accept;") \
        .replace("struct headers { h_t h; }",
                 "struct headers { h_t h; }\nstruct learn_t { bit<16> c; bit<8> m; }")
    res = compiler.compile_source(src, "t.p4")
    doc = res.bmv2_json
    assert doc["learn_lists"] == [{"id": 1, "name": "learn_t",
                                   "elements": [F("h", "c"), F("scalars", "metadata.m")]}]
    act = next(a for a in doc["actions"] if a["name"] == "I.act")
    assert act["primitives"] == [{"op": "generate_digest",
                                  "parameters": [H("0x00000001"), H("0x1")]}]
    (dg,) = res.p4info.digests
    assert dg.preamble.name == "learn_t" and dg.preamble.id >> 24 == 0x17
    assert dg.type_spec.struct.name == "learn_t"
    members = res.p4info.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [("c", 16),
                                                                              ("m", 8)]


def test_atomic_block_is_accepted_and_transparent() -> None:
    assert prims("@atomic { r.read(meta.w, 1); r.write(1, meta.w + 1); }") == \
        prims("r.read(meta.w, 1); r.write(1, meta.w + 1);")


def test_single_return_functions_are_inlined() -> None:
    src = PROGRAM.replace("BODY", "hdr.h.a = max8(hdr.h.a, p) + 1;").replace(
        "SELECT", "accept;").replace(
        "struct headers { h_t h; }",
        "struct headers { h_t h; }\nbit<8> max8(in bit<8> a, in bit<8> b) { return a > b ? a : b; }")
    doc = compiler.compile_source(src, "t.p4").bmv2_json
    act = next(a for a in doc["actions"] if a["name"] == "I.act")
    local = {"type": "local", "value": 0}
    cond = E(">", F("h", "a"), local)
    ternary = {"type": "expression",
               "value": {"op": "?", "left": F("h", "a"), "right": local, "cond": cond}}
    assert act["primitives"] == [{"op": "assign", "parameters": [
        F("h", "a"), P(E("&", E("+", ternary, H("0x01")), H("0xff")))]}]
