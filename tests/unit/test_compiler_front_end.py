"""Front-end rules p4c's samples rely on: `select()` over no expressions (issue1291-bmv2),
core.p4's `static_assert` (issue3531) and an action named like the extern function it calls
(issue1541: `action hash() { hash(...); }` calls v1model's hash; p4c picks among a name's
declarations by argument count).  Expected packets are worked out by hand."""
from __future__ import annotations

import pytest

from netsum import p4c as compiler
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Exact, TableEntry

TEMPLATE = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { TRANSITION }
    state parse_h { p.extract(h.h); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    ACTIONS
    apply { APPLY sm.egress_spec = 1; }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def program(transition: str = "transition parse_h;", actions: str = "", apply: str = "") -> str:
    return TEMPLATE.replace("TRANSITION", transition).replace("ACTIONS", actions) \
        .replace("APPLY", apply)


def run(src: str, frame: bytes) -> list[tuple[int, bytes]]:
    res = compiler.compile_source(src, "front_end.p4")
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    return d.process(0, frame)


def test_select_over_no_expressions_takes_its_default_case() -> None:
    src = program("transition select() { default: parse_h; }", apply="h.h.b = h.h.a + 1;")
    # parse_h ran (the header is valid and emitted): b = a + 1.
    assert run(src, bytes([7, 0, 9])) == [(1, bytes([7, 8, 9]))]


def test_select_over_no_expressions_with_a_value_case_is_refused() -> None:
    with pytest.raises(compiler.CompileError, match="only have 'default' cases"):
        compiler.compile_source(program("transition select() { 8w1: parse_h; }"), "x.p4")


def test_static_assert_true_compiles_to_nothing() -> None:
    src = program(apply='static_assert(V1MODEL_VERSION >= 20180101, "v1model too old");') \
        .replace("struct m { }", "struct m { }\nconst bool ok = static_assert(true);")
    res = compiler.compile_source(src, "sa.p4")
    ingress = next(p for p in res.bmv2_json["pipelines"] if p["name"] == "ingress")
    assert ingress["conditionals"] == []
    assert run(src, bytes([7, 0])) == [(1, bytes([7, 0]))]


@pytest.mark.parametrize("where", ["statement", "constant"])
def test_static_assert_false_is_an_error_naming_its_message(where: str) -> None:
    call = 'static_assert(8w1 == 8w2, "one is not two")'
    src = program(apply=call + ";") if where == "statement" else \
        program().replace("struct m { }", f"struct m {{ }}\nconst bool no = {call};")
    with pytest.raises(compiler.CompileError, match="static_assert failed: one is not two"):
        compiler.compile_source(src, "sa.p4")


def test_action_named_like_an_extern_function_calls_the_function() -> None:
    # identity hash of a, reduced modulo max = 7 (v1model: base + hash % max): b = a % 7.
    act = "action hash() { hash(h.h.b, HashAlgorithm.identity, 8w0, { h.h.a }, 16w7); }\n" \
          "table t { actions = { hash; } default_action = hash(); }"
    src = program(actions=act, apply="t.apply();")
    for a in (0, 6, 7, 200):
        assert run(src, bytes([a, 0xEE])) == [(1, bytes([a, a % 7]))]


@pytest.mark.parametrize("flag, b", [("true", 0x11), ("false", 0x22)])
def test_package_argument_constructor_constants(flag: str, b: int) -> None:
    """`V1Switch(P(true), ..., I(8w5), ...)`: P's `test` and I's `k` are constants of those
    blocks (parser-unroll-t1-cond): the select on `test` picks the state, `k` is added."""
    src = program("transition select(test) { true: parse_h; false: other; }",
                  apply="h.h.a = h.h.a + k;") \
        .replace("inout standard_metadata_t sm) {\n    state start",
                 "inout standard_metadata_t sm)(bool test) {\n"
                 "    state other { p.extract(h.h); h.h.b = 8w0x22; transition accept; }\n"
                 "    state start") \
        .replace("state parse_h { p.extract(h.h);",
                 "state parse_h { p.extract(h.h); h.h.b = 8w0x11;") \
        .replace("control I(inout hs h, inout m meta, inout standard_metadata_t sm) {",
                 "control I(inout hs h, inout m meta, inout standard_metadata_t sm)(bit<8> k) {") \
        .replace("V1Switch(P(), V(), I(),", f"V1Switch(P({flag}), V(), I(8w5),")
    assert run(src, bytes([7, 0])) == [(1, bytes([12, b]))]


def test_extern_instance_passed_to_a_control_and_a_typedef_of_an_extern() -> None:
    """issue1958: `sub.apply(h, reg)` binds the control's `register<bit<8>> r` parameter to the
    caller's register (p4c inlines it: one register, the caller's); issue2735-bmv2:
    `typedef register<bit<8>> R; R(4) reg;`.  Each packet reads the previous one's `a`."""
    sub = """
control Sub(inout hs h, register<bit<8>> r) {
    apply { bit<8> v; r.read(v, 32w1); h.h.b = v; r.write(32w1, h.h.a); }
}
typedef register<bit<8>> R;
"""
    src = program(actions="R(4) reg; Sub() sub;", apply="sub.apply(h, reg);") \
        .replace("control I(", sub + "control I(")
    res = compiler.compile_source(src, "extern_arg.p4")
    assert [(r["name"], r["size"], r["bitwidth"]) for r in res.bmv2_json["register_arrays"]] \
        == [("I.reg", 4, 8)]
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    assert d.process(0, bytes([5, 0xEE])) == [(1, bytes([5, 0]))]
    assert d.process(0, bytes([9, 0xEE])) == [(1, bytes([9, 5]))]
    assert d.process(0, bytes([1, 0xEE])) == [(1, bytes([1, 9]))]


def test_sub_parser_parameter_left_out_takes_its_default() -> None:
    """issue1937-2-bmv2: `foo.apply(x)` for `parser foo(out bit<8> x, in bit<8> y = 5)`."""
    sub = "parser Sub(out bit<8> x, in bit<8> y = 8w20) " \
          "{ state start { x = y >> 2; transition accept; } }\n"
    src = program().replace("state parse_h { p.extract(h.h);",
                            "state parse_h { p.extract(h.h); Sub.apply(h.h.a, h.h.a); "
                            "Sub.apply(h.h.b);") \
        .replace("parser P(", sub + "parser P(")
    # a = a >> 2 (y bound to a); b = 20 >> 2 = 5.
    assert run(src, bytes([0x40, 0xEE])) == [(1, bytes([0x10, 5]))]


def test_digest_of_a_list_without_a_struct_type() -> None:
    """issue430-1-bmv2: `digest(5, { f, g })` -- P4Info digest `digest_0` with a tuple type
    spec (p4c's auto-generated name), a learn list of the same name carrying the values."""
    src = program(apply="digest(32w5, { h.h.a, h.h.b });")
    res = compiler.compile_source(src, "tuple_digest.p4")
    (d,) = res.p4info.digests
    assert d.preamble.name == "digest_0" and not d.type_spec.HasField("struct")
    assert [m.bitstring.bit.bitwidth for m in d.type_spec.tuple.members] == [8, 8]
    (ll,) = res.bmv2_json["learn_lists"]
    assert ll["name"] == "digest_0"
    dev = Device()
    dev.install(Device.build_pipeline(res.bmv2_json))
    got: list[tuple[int, tuple[int, ...]]] = []
    dev.digest_handler = lambda lid, values: got.append((lid, values))
    assert dev.process(0, bytes([3, 4])) == [(1, bytes([3, 4]))]
    assert got == [(ll["id"], (3, 4))]


@pytest.mark.parametrize("a, b", [(1, 2), (1, 3), (2, 2)])
def test_struct_constant_compared_and_assigned(a: int, b: int) -> None:
    """issue1210: `const PortId_t C = {9w192}; ... meta.foo == C` compares member by member
    (p4c's midend: `meta.foo._v == 9w192`); `meta.q = C` assigns the members."""
    src = program(apply="meta.p.x = h.h.a; meta.p.y = h.h.b; meta.q = K; "
                        "if (meta.p == K) { h.h.a = 8w0xAA; } h.h.b = meta.q.y;") \
        .replace("struct m { }", "struct pair_t { bit<8> x; bit<8> y; }\n"
                                 "struct m { pair_t p; pair_t q; }\n"
                                 "const pair_t K = { 8w1, 8w2 };")
    # a becomes 0xAA only when (a, b) equals K = (1, 2); b becomes K.y = 2.
    assert run(src, bytes([a, b])) == [(1, bytes([0xAA if (a, b) == (1, 2) else a, 2]))]


def test_structured_annotations_in_p4info() -> None:
    """structured_annotations: `@Name[expressions]` and `@Name[key = value, ...]` on a table
    and on an action reference, values folded (2*3 = 6, 1==2 = false, -(4) = -4) into
    P4Info's structured_annotations as p4c writes them; plain annotations stay strings."""
    act = """action a() { }
    @List[1, "hello", true, 1==2, 2*3] @KV[label="text", neg=-(4)] @plain("x")
    table t { actions = { @myid[7] a; NoAction; } default_action = NoAction(); }"""
    res = compiler.compile_source(program(actions=act, apply="t.apply();"), "sa.p4")
    (t,) = res.p4info.tables
    assert list(t.preamble.annotations) == ['@plain("x")']
    lst, kv = t.preamble.structured_annotations
    assert lst.name == "List"
    got = [(e.WhichOneof("value"), getattr(e, e.WhichOneof("value")))
           for e in lst.expression_list.expressions]
    assert got == [("int64_value", 1), ("string_value", "hello"), ("bool_value", True),
                   ("bool_value", False), ("int64_value", 6)]
    assert kv.name == "KV"
    assert [(p.key, getattr(p.value, p.value.WhichOneof("value")))
            for p in kv.kv_pair_list.kv_pairs] == [("label", "text"), ("neg", -4)]
    ref = t.action_refs[0]
    assert [(s.name, [e.int64_value for e in s.expression_list.expressions])
            for s in ref.structured_annotations] == [("myid", [7])]


def test_structured_annotation_with_a_run_time_value_is_refused() -> None:
    act = "@Bad[h.h.a] table t { actions = { NoAction; } default_action = NoAction(); }"
    with pytest.raises(compiler.CompileError, match="structured annotation '@Bad' value"):
        compiler.compile_source(program(actions=act), "sa.p4")


def test_generic_header_and_struct_are_specialized() -> None:
    """issue4835-generic-struct: `header g_t<T> { T x; T y; }`, `struct gs<T> { g_t<T> g; }`
    used as gs<bit<8>>: p4c's front end specializes them as g_t_bit8 and gs_bit8."""
    src = program(apply="meta.s.g.setValid(); meta.s.g.x = h.h.a; meta.s.g.y = 8w7; "
                        "h.h.b = meta.s.g.x + meta.s.g.y;") \
        .replace("struct m { }", "header g_t<T> { T x; T y; }\nstruct gs<T> { g_t<T> g; }\n"
                                 "struct m { gs<bit<8>> s; }")
    res = compiler.compile_source(src, "generic.p4")
    types = {t["name"]: t["fields"] for t in res.bmv2_json["header_types"]}
    assert types["g_t_bit8"] == [["x", 8, False], ["y", 8, False]]
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    assert d.process(0, bytes([5, 0])) == [(1, bytes([5, 12]))]


LAST = """
#include <core.p4>
#include <v1model.p4>
header e_t { bit<8> v; }
struct hs { e_t[2] s; e_t t; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.s.next); transition select(h.s.last.v) { 0: done; default: more; } }
    state more { p.extract(h.s.next); transition done; }
    state done { h.t = h.s.last; transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


@pytest.mark.parametrize("frame, out", [(bytes([1, 2]), bytes([1, 2, 2])),
                                        (bytes([0, 9]), bytes([0, 0, 9]))])
def test_header_assigned_a_stacks_last_element_in_a_parser(frame: bytes, out: bytes) -> None:
    """issue1607-bmv2: `meta.temp = hdr.stack.last;` in a parser state copies the element
    extracted last (two extracted: s[1]; one: s[0], the rest of the frame is payload)."""
    assert run(LAST, frame) == [(1, out)]


DYN_VALID = """
#include <core.p4>
#include <v1model.p4>
header i_t { bit<8> k; bit<8> a; bit<8> b; }
header e_t { bit<8> v; }
struct hs { i_t i; e_t[2] s; }
struct m { bit<8> k; }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.i); meta.k = h.i.k; h.s[meta.k].setValid(); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    apply {
        if (h.s[0].isValid()) { h.i.a = 1; }
        if (h.s[1].isValid()) { h.i.b = 1; }
        sm.egress_spec = 1;
    }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.i); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


@pytest.mark.parametrize("k, a, b", [(0, 1, 0), (1, 0, 1)])
def test_set_valid_on_a_run_time_index_in_a_parser(k: int, a: int, b: int) -> None:
    """parser-unroll-test10: `hdr.hs[meta.i].setValid();` in a parser state makes the element
    the index names valid (add_header on a dereference_header_stack operand)."""
    assert run(DYN_VALID, bytes([k, 0, 0])) == [(1, bytes([k, a, b]))]


def test_action_list_arguments_that_call_a_function() -> None:
    """issue2321: `actions = { a2(bump(h.a), bump(h.a)); }` -- the calls run each time a2
    runs, left to right, before its body (p4c's midend inlines them into a2, which then takes
    no parameters).  By hand for a = 5: the first bump makes a 6 and gives 6, the second
    makes it 7 and gives 7, so b = 0x67 (y in the high nibble: the order shows)."""
    fn = "bit<8> bump(inout bit<8> x) { x = x + 1; return x; }\n"
    act = """action a2(in bit<8> y, in bit<8> z) { h.h.b = (y << 4) | z; }
    table t { key = { h.h.b : exact; } actions = { a2(bump(h.h.a), bump(h.h.a)); NoAction; }
              default_action = NoAction(); }"""
    src = program(actions=act, apply="t.apply();").replace("control I(", fn + "control I(")
    res = compiler.compile_source(src, "bound_calls.p4")
    (a2,) = [a for a in res.p4info.actions if a.preamble.name == "I.a2"]
    assert list(a2.params) == []
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    d.pipeline.tables["I.t"].insert(TableEntry((Exact(0),), ActionCall("I.a2", ())))
    assert d.process(0, bytes([5, 0])) == [(1, bytes([7, 0x67]))]
    assert d.process(0, bytes([5, 1])) == [(1, bytes([5, 1]))]  # a miss: nothing runs
