"""A table applied in several places, as p4c-bm2-ss allows it: every application must be
followed by the same node, since a BMv2 table has one set of next pointers (p4c's copyprop1
and issue986-1-bmv2: `if (c) { t.apply(); } else { t.apply(); }`).  Applications followed by
different nodes (issue986-bmv2, in p4c's XFAIL_TESTS) and a table applied twice in a row
(issue2344, a loop in BMv2's graph) are refused as p4c refuses them.  Packets worked out by
hand: the branch's own statement runs, then the table, then what follows the `if`."""
from __future__ import annotations

import pytest

from netsum import p4c as compiler
from netsum.switch.device import Device

TEMPLATE = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> c; bit<8> a; bit<8> b; bit<8> d; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    action set_b(bit<8> v) { h.h.b = v; }
    table t {
        key = { h.h.a : exact; }
        actions = { set_b; NoAction; }
        const entries = { 8w1 : set_b(8w11); 8w2 : set_b(8w22); }
        default_action = NoAction();
    }
    apply { APPLY }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""

BOTH_BRANCHES = """
    if (h.h.c == 0) { h.h.a = 8w1; t.apply(); } else { t.apply(); }
    h.h.d = h.h.b + 1;
    sm.egress_spec = 1;
"""


def test_one_node_serves_both_applications() -> None:
    res = compiler.compile_source(TEMPLATE.replace("APPLY", BOTH_BRANCHES), "reapply.p4")
    ingress = next(p for p in res.bmv2_json["pipelines"] if p["name"] == "ingress")
    assert [t["name"] for t in ingress["tables"]].count("I.t") == 1
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    # c == 0: a := 1, t sets b = 11, d = 12.
    assert d.process(0, bytes([0, 2, 0, 0])) == [(1, bytes([0, 1, 11, 12]))]
    # c != 0: a stays 2, t sets b = 22, d = 23.
    assert d.process(0, bytes([5, 2, 0, 0])) == [(1, bytes([5, 2, 22, 23]))]
    # c != 0, a misses: b unchanged (7), d = 8.
    assert d.process(0, bytes([5, 9, 7, 0])) == [(1, bytes([5, 9, 7, 8]))]


@pytest.mark.parametrize("apply, message", [
    ("if (h.h.c == 0) { t.apply(); h.h.d = 1; } else { t.apply(); }",
     "with different successors"),
    ("t.apply(); t.apply();", "applied twice in a row"),
    ("if (t.apply().hit) { h.h.d = 1; } t.apply();", "is applied more than once"),
])
def test_different_successors_are_refused(apply: str, message: str) -> None:
    with pytest.raises(compiler.CompileError, match=message):
        compiler.compile_source(TEMPLATE.replace("APPLY", apply), "reapply_bad.p4")
