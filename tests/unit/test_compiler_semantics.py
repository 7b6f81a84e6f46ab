"""Name binding and calling conventions, checked by running netsum-p4c's JSON on the embedded
switch: every expected header value below is worked out by hand from P4_16 semantics (spec
§6.8 copy-in/copy-out, §12.5 exit, lexical scoping of declarations), never taken from the
compiler.  These are the programs that used to compile silently to the wrong behaviour:
a local with an initializer read later, a local kept across a table apply, a control local
bound to a parser local of the same name, and action parameters aliased with their
arguments."""
from __future__ import annotations

import pytest

from netsum import p4c as compiler
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Exact, TableEntry

#: Ethernet, then a probe header the programs read and write: a, b, c (8 bits), w (16).
HEAD = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header p_t { bit<8> a; bit<8> b; bit<8> c; bit<16> w; }
struct headers { eth_t eth; p_t p; }
struct metadata { bit<8> x; bit<8> y; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.p); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.p); } }
"""
MAIN = "V1Switch(P(), VC(), I(), E(), CC(), D()) main;\n"
DST = bytes.fromhex("0a0b0c0d0e0f")
SRC = bytes.fromhex("010203040506")


def run(ingress: str, a: int = 1, b: int = 2, c: int = 3, w: int = 0x0800,
        etype: int = 0x0800, prelude: str = "", entries: tuple[TableEntry, ...] = (),
        table: str = "", port: int = 1) -> tuple[bytes, bytes, int, int, int, int] | None:
    """Compile HEAD + ingress, send one frame; (dst, src, a, b, c, w) of what leaves (on
    ``port``), or None when nothing does."""
    src = HEAD + prelude + ingress + MAIN
    dev = Device()
    dev.install(Device.build_pipeline(compiler.compile_source(src, "sem.p4").bmv2_json))
    for e in entries:
        dev.pipeline.tables[table].insert(e)
    frame = DST + SRC + etype.to_bytes(2, "big") + bytes([a, b, c]) + w.to_bytes(2, "big")
    out = dev.process(1, frame + b"payload")
    if not out:
        return None
    (got, data), = out
    assert got == port
    return (data[0:6], data[6:12], data[14], data[15], data[16],
            int.from_bytes(data[17:19], "big"))


def ingress(body: str, decls: str = "") -> str:
    return ("control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {\n"
            + decls + "\n    apply { sm.egress_spec = 1;\n" + body + "\n    }\n}\n")


# ---------------------------------------------------------------- locals (the miscompiles)

def test_local_with_initializer_read_after_an_if() -> None:
    # bit<48> t = dst; if (type == 0x0800) src = t;  => src becomes dst.
    out = run(ingress("bit<48> t = hdr.eth.dst;\n"
                      "if (hdr.eth.type == 0x0800) { hdr.eth.src = t; }"))
    assert out is not None and out[1] == DST
    out = run(ingress("bit<48> t = hdr.eth.dst;\n"
                      "if (hdr.eth.type == 0x0800) { hdr.eth.src = t; }"), etype=0x86DD)
    assert out is not None and out[1] == SRC


def test_local_kept_across_a_table_apply() -> None:
    # saved = w; t1 rewrites w; w = saved + 1: the table's write is overwritten.
    decls = ("    action setw(bit<16> v) { hdr.p.w = v; }\n"
             "    table t1 { key = { hdr.p.a: exact; } actions = { setw; NoAction; } "
             "default_action = setw(0x5555); }")
    out = run(ingress("bit<16> saved = hdr.p.w;\nt1.apply();\nhdr.p.w = saved + 1;", decls),
              w=0x1234)
    assert out is not None and out[5] == 0x1235


def test_control_local_is_not_the_parser_local_of_the_same_name() -> None:
    prelude = """
parser P2(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.p);
        bit<8> t = hdr.p.b;
        transition select(t) { 2: s2; default: accept; } }
    state s2 { meta.x = 7; transition accept; }
}
"""
    src = ingress("bit<8> t = meta.x;\nhdr.p.c = t;")
    text = HEAD + prelude + src + "V1Switch(P2(), VC(), I(), E(), CC(), D()) main;\n"
    dev = Device()
    dev.install(Device.build_pipeline(compiler.compile_source(text, "sem.p4").bmv2_json))
    frame = DST + SRC + b"\x08\x00" + bytes([1, 2, 3]) + b"\x00\x00"
    (_, data), = dev.process(1, frame)
    assert data[16] == 7  # the control's t is meta.x (7), not the parser's t (2)


def test_shadowing_in_nested_blocks() -> None:
    # x = 1; { x = 2 (inner); c = x (2) } b = x (outer, still 1); a = inner-or-outer? outer.
    out = run(ingress("bit<8> x = 1;\n"
                      "if (hdr.p.a == 1) { bit<8> x = 2; hdr.p.c = x; }\n"
                      "hdr.p.b = x;"))
    assert out is not None and (out[3], out[4]) == (1, 2)


def test_initializer_reads_the_outer_variable_of_the_same_name() -> None:
    out = run(ingress("bit<8> x = hdr.p.a;\n"
                      "if (hdr.p.a == 5) { bit<8> x = x + 10; hdr.p.b = x; }\n"
                      "hdr.p.c = x;"), a=5)
    assert out is not None and (out[3], out[4]) == (15, 5)


def test_a_block_reentered_reassigns_its_local() -> None:
    # Two uses of an action with a local initialized from a field.
    decls = "    action cp() { bit<8> v = hdr.p.a; hdr.p.b = v; hdr.p.a = v + 1; }"
    out = run(ingress("cp(); cp();", decls), a=9)
    assert out is not None and (out[2], out[3]) == (11, 10)


def test_locals_in_an_action_are_separate_from_apply_locals() -> None:
    decls = "    action f() { bit<8> v = 40; hdr.p.c = v; }"
    out = run(ingress("bit<8> v = 3;\nf();\nhdr.p.b = v;", decls))
    assert out is not None and (out[3], out[4]) == (3, 40)


# ---------------------------------------------------------------- copy-in/copy-out

def test_inout_argument_is_copied_out_over_the_callee_write() -> None:
    # a(c): x = 12 (copy-in); h.f = 12; c = 24; copy-out x -> c = 12.  Twice: f = 12.
    decls = ("    bit<8> c = 12;\n"
             "    action a(inout bit<8> x) { hdr.p.a = x; c = 24; }")
    out = run(ingress("a(c); a(c); hdr.p.b = c;", decls))
    assert out is not None and (out[2], out[3]) == (12, 12)


def test_inout_headers_copy_out_undoes_a_direct_write() -> None:
    # val is a copy of hdr; writing hdr.p.b directly is undone when val is copied back.
    decls = "    action a(inout headers val) { val.p.a = 0x11; hdr.p.b = 0x22; }"
    out = run(ingress("a(hdr);", decls), a=1, b=2)
    assert out is not None and (out[2], out[3]) == (0x11, 2)


def test_same_location_passed_to_in_and_inout() -> None:
    # a(x = c, y = c): y is a copy of the old c, so c gets 2*old (in is not aliased).
    decls = ("    action a(inout bit<8> x, in bit<8> y) { x = x + 1; x = x + y; }")
    out = run(ingress("a(hdr.p.c, hdr.p.c);", decls), c=5)
    assert out is not None and out[4] == 11


def test_two_inout_copies_are_written_back_left_to_right() -> None:
    decls = "    action a(inout bit<8> x, inout bit<8> y) { x = 1; y = 2; }"
    out = run(ingress("a(hdr.p.c, hdr.p.c);", decls), c=5)
    assert out is not None and out[4] == 2  # x copied back first, then y


def test_out_header_parameter_starts_invalid() -> None:
    # An out header copy is invalid on entry: setting a field of it without setValid and
    # copying it out leaves the argument invalid, so p is not emitted.
    decls = "    action a(out p_t h) { h.a = 9; }"
    out = run(ingress("a(hdr.p);", decls))
    assert out is not None
    # frame = eth only now: the probe bytes that follow were payload
    assert (out[2], out[3], out[4]) == (ord("p"), ord("a"), ord("y"))


def test_out_header_made_valid_is_copied_out() -> None:
    decls = "    action a(out p_t h) { h.setValid(); h.a = 9; h.b = 8; h.c = 7; h.w = 6; }"
    assert run(ingress("a(hdr.p);", decls), a=1) == (DST, SRC, 9, 8, 7, 6)


def test_exit_inside_an_inlined_action_still_copies_out() -> None:
    # spec §12.5: copy-out of the callee (and its callers) happens after exit.
    decls = ("    action inner(inout bit<8> v) { v = 77; exit; }\n"
             "    action outer(inout bit<8> u) { inner(u); u = 5; }")
    out = run(ingress("outer(hdr.p.c); hdr.p.b = 99;", decls))
    assert out is not None and (out[3], out[4]) == (2, 77)


def test_return_inside_an_inlined_action_copies_out_and_continues() -> None:
    decls = ("    action inner(inout bit<8> v) { v = 77; if (v == 77) { return; } v = 1; }\n"
             "    action outer(inout bit<8> u) { inner(u); u = u + 1; }")
    out = run(ingress("outer(hdr.p.c);", decls))
    assert out is not None and out[4] == 78


def test_table_action_with_a_bound_inout_argument() -> None:
    decls = ("    action bump(inout bit<8> v, bit<8> d) { v = v + d; }\n"
             "    table t { key = { hdr.p.a: exact; } actions = { bump(hdr.p.c); NoAction; } "
             "default_action = NoAction(); }")
    entry = TableEntry((Exact(1),), ActionCall("I.bump", (10,)))
    out = run(ingress("t.apply();", decls), c=5, entries=(entry,), table="I.t")
    assert out is not None and out[4] == 15


def test_direct_call_with_standard_metadata_inout() -> None:
    # s is a copy of sm (a metadata header, as p4c makes it); the copy-out writes it back.
    decls = "    action a(inout standard_metadata_t s) { s.egress_spec = 5; }"
    assert run(ingress("a(sm);", decls), port=5) is not None
    decls = ("    action a(inout standard_metadata_t s) { s.egress_spec = 5; }\n"
             "    action b(inout standard_metadata_t s) { s.egress_spec = s.egress_spec + 2; }")
    assert run(ingress("a(sm); b(sm);", decls), port=7) is not None


def test_mark_to_drop_on_a_copy_of_standard_metadata() -> None:
    # mark_to_drop(s) drops through the copy s; the copy-out writes it back to sm.
    decls = "    action a(inout standard_metadata_t s) { s.egress_spec = 1; mark_to_drop(s); }"
    assert run(ingress("a(sm);", decls)) is None
    decls = "    action a(inout standard_metadata_t s) { mark_to_drop(s); s.egress_spec = 1; }"
    assert run(ingress("a(sm);", decls)) is not None


def test_global_action_inout_and_global_register() -> None:
    prelude = ("register<bit<8>>(4) gr;\n"
               "action ga(inout p_t e) { e.a = 0xAD; gr.write(1, 0x42); }\n")
    src = ingress("ga(hdr.p);\nbit<8> v; gr.read(v, 1); hdr.p.b = v;")
    out = run(src, prelude=prelude)
    assert out is not None and (out[2], out[3]) == (0xAD, 0x42)


@pytest.mark.parametrize("stmt, etype, c", [
    ("if (hdr.eth.type == 0) exit;", 0, 3),
    ("if (hdr.eth.type == 0) exit;", 1, 42),
    ("if (hdr.eth.type != 0) { hdr.p.a = 4; } else exit;", 0, 3),
    ("if (hdr.eth.type != 0) { hdr.p.a = 4; } else exit;", 1, 42),
    ("if (hdr.eth.type == 0) return;", 0, 3),
    ("if (hdr.eth.type == 0) return;", 1, 42),
])
def test_unbraced_exit_and_return(stmt: str, etype: int, c: int) -> None:
    # Either ends ingress before `c = 42` (egress_spec is already set, so the frame leaves).
    out = run(ingress(stmt + "\nhdr.p.c = 42;"), etype=etype)
    assert out is not None and out[4] == c


def test_parser_state_without_transition_goes_to_reject_with_a_warning() -> None:
    # P4_16 / p4c: a state with no transition statement transitions to reject (p4c warns);
    # BMv2 ends parsing there as for any reject.
    src = HEAD.replace("pkt.extract(hdr.p); transition accept; }",
                       "transition select(hdr.eth.type) { 0x0800: more; default: accept; } }\n"
                       "    state more { pkt.extract(hdr.p); }") + ingress("hdr.p.c = 1;") + MAIN
    res = compiler.compile_source(src, "nt.p4")
    assert any("implicit transition to `reject'" in w.message for w in res.warnings)
    (more,) = [s for s in res.bmv2_json["parsers"][0]["parse_states"] if s["name"] == "more"]
    assert more["transitions"] == [{"type": "default", "value": None, "mask": None,
                                    "next_state": None}]


def test_header_field_of_enum_type() -> None:
    # enum bit<8> fields are stored, compared and assigned like their underlying bit<8>.
    src = HEAD.replace("header p_t { bit<8> a;", "enum bit<8> Op { ADD = 1, SUB = 2 }\n"
                       "header p_t { Op a;") + ingress(
        "if (hdr.p.a == Op.SUB) { hdr.p.b = hdr.p.b - hdr.p.c; hdr.p.a = Op.ADD; }") + MAIN
    dev = Device()
    dev.install(Device.build_pipeline(compiler.compile_source(src, "en.p4").bmv2_json))
    (_, out), = dev.process(1, DST + SRC + b"\x08\x00" + bytes([2, 10, 3]) + b"\x00\x00")
    assert out[14:17] == bytes([1, 7, 3])
    (_, out), = dev.process(1, DST + SRC + b"\x08\x00" + bytes([1, 10, 3]) + b"\x00\x00")
    assert out[14:17] == bytes([1, 10, 3])


# ---------------------------------------------------------------- functions with statements

FUNCS = """
bit<8> twice(in bit<8> v) { bit<8> t = v; return t + t; }
bit<8> clamp(in bit<8> v, in bit<8> hi) {
    if (v > hi) { return hi; }
    bit<8> w = v + 1;
    return w;
}
bit<8> bump(inout bit<8> v) { v = v + 1; return 10; }
bool side(inout bit<8> v) { v = 99; return true; }
void fill(out p_t h) { h.setValid(); h.a = 1; h.b = 2; h.c = 3; h.w = 4; }
"""


@pytest.mark.parametrize("body, a, b, c, want", [
    # twice(b) + 1 = 2*b + 1
    ("hdr.p.a = twice(hdr.p.b) + 1;", 0, 5, 0, (11, 5, 0)),
    # the early return skips the rest of clamp's body; otherwise w = v + 1
    ("hdr.p.a = clamp(hdr.p.b, 4); hdr.p.c = clamp(hdr.p.c, 4);", 0, 9, 2, (4, 9, 3)),
    # operands left to right: a (7) is read before bump(a) runs; bump copies 8 out to a and
    # returns 10, so b = 7 + 10
    ("hdr.p.b = hdr.p.a + bump(hdr.p.a);", 7, 0, 0, (8, 17, 0)),
    # && does not evaluate its right side when the left is false; || when it is true
    ("bool x = hdr.p.a == 0 && side(hdr.p.b); bool y = hdr.p.a == 1 || side(hdr.p.c);",
     1, 5, 6, (1, 5, 6)),
    ("bool x = hdr.p.a == 1 && side(hdr.p.b);", 1, 5, 6, (1, 99, 6)),
    # ?: evaluates only the branch it takes
    ("hdr.p.a = hdr.p.a == 1 ? bump(hdr.p.b) : bump(hdr.p.c);", 1, 5, 6, (10, 6, 6)),
])
def test_function_calls_in_expressions(body: str, a: int, b: int, c: int,
                                       want: tuple[int, int, int]) -> None:
    out = run(ingress(body), a=a, b=b, c=c, prelude=FUNCS)
    assert out is not None and out[2:5] == want


def test_function_out_header_parameter() -> None:
    assert run(ingress("fill(hdr.p);"), prelude=FUNCS) == (DST, SRC, 1, 2, 3, 4)


def test_function_calls_inside_an_action() -> None:
    decls = "    action act() { hdr.p.c = clamp(hdr.p.a, 3) + twice(hdr.p.b); }"
    out = run(ingress("act();", decls), a=7, b=2, prelude=FUNCS)
    assert out is not None and out[4] == 3 + 4


def test_compound_assignments() -> None:
    # a op= b is a = a op b (P4_16 1.2.4): 5 + 3 = 8, 8 << 1 = 16, 16 |-| 20 = 0 (saturating)
    body = "hdr.p.a += 3; hdr.p.a <<= 1; hdr.p.b = hdr.p.a; hdr.p.c = hdr.p.b; hdr.p.c |-|= 20;"
    out = run(ingress(body), a=5)
    assert out is not None and out[2:5] == (16, 16, 0)


def test_a_control_without_tables_applies_twice() -> None:
    # Each apply of a table-free control instance is inlined anew (as p4c does).
    prelude = "control Inc(inout bit<8> v) { apply { v = v + 1; } }\n"
    decls = "    Inc() inc;"
    out = run(ingress("inc.apply(hdr.p.a); inc.apply(hdr.p.a); inc.apply(hdr.p.b);", decls),
              a=1, b=7, prelude=prelude)
    assert out is not None and out[2:4] == (3, 8)


def test_control_instance_with_computed_and_default_arguments() -> None:
    # v = a + 1 is computed into a copy first; w takes its default 7.
    prelude = "control Sum(in bit<8> v, inout bit<8> out_, in bit<8> w = 7) " \
              "{ apply { out_ = v + w; } }\n"
    out = run(ingress("s.apply(hdr.p.a + 1, hdr.p.c);", "    Sum() s;"), a=2, prelude=prelude)
    assert out is not None and out[4] == 2 + 1 + 7


@pytest.mark.parametrize("body, want", [
    ("hdr.p.a = 8w250 |+| 8w10;", 255),             # saturates at the top
    ("hdr.p.a = 8w3 |-| 8w10;", 0),                 # and at zero
    ("hdr.p.a = (bit<8>)(4s7 |+| 4s3);", 7),        # int<4> saturates at 7
    ("hdr.p.a = (bit<8>)(-4s7 >> 1);", 0xFC),       # -7 >> 1 = -4 (arithmetic), as bit<8>
    ("if (-1 > 4w8) { hdr.p.a = 1; } else { hdr.p.a = 2; }", 1),   # -1 is 4w15 here
    ("if (4w8 > -1) { hdr.p.a = 1; } else { hdr.p.a = 2; }", 2),
    ("hdr.p.a = 8w1 + 300;", 45),                   # 300 truncated to 8 bits (p4c warns)
])
def test_constant_folding(body: str, want: int) -> None:
    out = run(ingress(body), a=0)
    assert out is not None and out[2] == want


TABLE = ("    action setc(bit<8> v) { hdr.p.c = v; }\n"
         "    table t { key = { hdr.p.a: exact; } actions = { setc; NoAction; } "
         "default_action = NoAction(); }")


@pytest.mark.parametrize("body, a, want_b, want_c", [
    # the outcome of an apply inside a ?: (the table runs; its action sets c)
    ("hdr.p.b = t.apply().hit ? 8w10 : 8w20;", 1, 10, 0x33),
    ("hdr.p.b = t.apply().hit ? 8w10 : 8w20;", 2, 20, 3),
    # || short-circuits: with a == 1 the table is not applied at all (c stays 3)
    ("hdr.p.b = (hdr.p.a == 1 || t.apply().hit) ? 8w10 : 8w20;", 1, 10, 3),
    ("hdr.p.b = (hdr.p.a == 1 || t.apply().hit) ? 8w10 : 8w20;", 2, 20, 3),
])
def test_table_apply_inside_an_expression(body: str, a: int, want_b: int, want_c: int) -> None:
    entry = TableEntry((Exact(1),), ActionCall("I.setc", (0x33,)))
    out = run(ingress(body, TABLE), a=a, c=3, entries=(entry,), table="I.t")
    assert out is not None and (out[3], out[4]) == (want_b, want_c)


def test_slices_as_inout_arguments_and_nested_slices() -> None:
    decls = "    action bump(inout bit<4> v) { v = v + 1; }"
    out = run(ingress("bump(hdr.p.c[7:4]); hdr.p.b[7:4][1:0] = 2w3;", decls), b=0, c=0x25)
    assert out is not None and out[4] == 0x35 and out[3] == 0x30


@pytest.mark.parametrize("a, want_b, want_c", [(1, 10, 0x33), (2, 20, 3), (7, 20, 3)])
def test_table_apply_on_the_right_of_and(a: int, want_b: int, want_c: int) -> None:
    # a == 7: the && stops before the table (c stays 3); a == 2: applied, misses
    body = "if (hdr.p.a != 7 && t.apply().hit) { hdr.p.b = 10; } else { hdr.p.b = 20; }"
    entry = TableEntry((Exact(1),), ActionCall("I.setc", (0x33,)))
    out = run(ingress(body, TABLE), a=a, c=3, entries=(entry,), table="I.t")
    assert out is not None and (out[3], out[4]) == (want_b, want_c)
