"""A header stack element picked by a run-time index where no statement of its own runs first:
a table key (p4c's SimplifyKey then HSIndexSimplifier: a variable set before each application,
one branch per element) and a switch's expression (read once into a variable before the
cases); also another table's apply result as a key.  p4c's control-hs-index-test6, issue3374
and issue2362-bmv2 are these; none has an STF test, so the packets here are worked out by
hand: the element the index names decides the table entry and the switch case."""
from __future__ import annotations

import pytest

from netsum import p4c as compiler
from netsum.switch.device import Device

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header i_t { bit<8> index; }
header e_t { bit<8> a; }
header o_t { bit<8> k; bit<8> s; }
struct hs { i_t i; e_t[2] h; o_t o; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.i); p.extract(h.h[0]); p.extract(h.h[1]); p.extract(h.o);
                  transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    action set_k(bit<8> v) { h.o.k = v; }
    table t {
        key = { h.h[h.i.index].a : exact; }
        actions = { set_k; NoAction; }
        const entries = { 8w10 : set_k(8w1); 8w20 : set_k(8w2); }
        default_action = NoAction();
    }
    apply {
        APPLY
        sm.egress_spec = 1;
    }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
SWITCH = """switch (h.h[h.i.index].a) { 8w10: { h.o.s = 8w100; } 8w20: { h.o.s = 8w200; } }"""


@pytest.fixture(scope="module")
def res() -> compiler.CompileResult:
    src = PROGRAM.replace("APPLY", "if (t.apply().hit) { " + SWITCH + " }")
    return compiler.compile_source(src, "stack_keys.p4")


def test_key_keeps_its_p4info_name(res: compiler.CompileResult) -> None:
    table = next(t for t in res.p4info.tables if t.preamble.name == "I.t")
    assert [f.name for f in table.match_fields] == ["h.h[h.i.index].a"]
    assert [f.bitwidth for f in table.match_fields] == [8]


@pytest.mark.parametrize("index, a0, a1, k, s", [
    (0, 10, 20, 1, 100),   # h[0].a = 10: entry 10, case 10
    (1, 10, 20, 2, 200),   # h[1].a = 20
    (0, 20, 10, 2, 200),   # the same index, the other element's value decides
    (1, 20, 10, 1, 100),
    (0, 30, 10, 0x55, 0x66),  # miss: nothing written
])
def test_element_named_by_the_index_decides(res: compiler.CompileResult, index: int, a0: int,
                                            a1: int, k: int, s: int) -> None:
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    frame = bytes([index, a0, a1, 0x55, 0x66])
    assert d.process(0, frame) == [(1, bytes([index, a0, a1, k, s]))]


def test_key_is_set_before_a_table_applied_in_a_switch() -> None:
    src = PROGRAM.replace("APPLY", "switch (t.apply().action_run) { set_k: { " + SWITCH + " } }")
    res = compiler.compile_source(src, "stack_keys_switch.p4")
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    assert d.process(0, bytes([1, 10, 20, 0, 0])) == [(1, bytes([1, 10, 20, 2, 200]))]


HIT_KEY = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    action set_b(bit<8> v) { h.h.b = v; }
    table sub { key = { h.h.a : exact; } actions = { NoAction; }
                const entries = { 8w1 : NoAction(); } default_action = NoAction(); }
    table t {
        key = { sub.apply().hit : exact @name("sub_hit"); }
        actions = { set_b; NoAction; }
        const entries = { true : set_b(8w11); false : set_b(8w22); }
        default_action = NoAction();
    }
    apply { t.apply(); sm.egress_spec = 1; }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


@pytest.mark.parametrize("a, b", [(1, 11), (2, 22)])
def test_key_on_another_tables_apply_result(a: int, b: int) -> None:
    """issue2362-bmv2: `key = { sub.apply().hit : exact; }` -- sub is applied just before t
    and its outcome kept in a bool variable t matches on (p4c's SimplifyKey)."""
    res = compiler.compile_source(HIT_KEY, "hit_key.p4")
    (t,) = [x for x in res.p4info.tables if x.preamble.name == "I.t"]
    assert [(f.name, f.bitwidth) for f in t.match_fields] == [("sub_hit", 1)]
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    assert d.process(0, bytes([a, 0])) == [(1, bytes([a, b]))]
