"""Functions with statements or out/inout parameters, called where P4 puts them: inside the
index of an assignment's left side (evaluated once, before the right side, also for `op=`),
as a statement when the function is a plain `return e;` (its arguments still run), and from
the `return` expression of a function that would otherwise stay an expression.  Expected
packets are worked out by hand from the P4 source; p4c's gauntlet_index_8-bmv2 and
opassign2-bmv2 STF tests pass too (and gauntlet_hdr_in_value-bmv2's: a member of a structure
initializer passed to a function), and issue2289, issue2291-bmv2 and issue2355 compile with
P4Info identical to p4c's.

Deliberate miscompiles these tests caught: the left side of `a[f(x)] |= b` evaluated twice
(f's side effect happens twice), a pure function's call statement dropped with its
arguments, and the left side's index read after the right side's call changed it (a defect
main had: `w[j & 3] = postincr(j) + 16` wrote w[j + 1])."""
from __future__ import annotations

import pytest

from netsum import p4c as compiler
from netsum.switch.device import Device

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header c_t { bit<8> i; bit<8> j; bit<8> k; bit<8> v; }
header w_t { bit<8> x; }
struct hs { c_t c; w_t[4] w; }
struct pair_t { w_t lo; c_t c; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start {
        p.extract(h.c);
        p.extract(h.w.next); p.extract(h.w.next); p.extract(h.w.next); p.extract(h.w.next);
        transition accept;
    }
}
control V(inout hs h, inout m meta) { apply { } }

bit<8> postincr(inout bit<8> x) {
    bit<8> rv = x;
    x = x + 1;
    return rv;
}
bit<8> ignore(in bit<8> v) { return 0; }
bit<8> twice(in bit<8> v) {
    bit<8> t = v;
    t = t + v;
    return t;
}
bit<8> twice_plus_one(in bit<8> v) { return twice(v) + 1; }
bit<8> mix(in pair_t p) { return p.c.v - p.lo.x; }

control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    apply {
        // w[i & 3] |= v, i incremented once.
        h.w[postincr(h.c.i) & 3].x |= h.c.v;
        // the target element is fixed before the right side changes j: w[j & 3] = j + 1 + 16
        h.w[h.c.j & 3].x = postincr(h.c.j) + 16;
        // only the argument's side effect remains
        ignore(postincr(h.c.k));
        h.c.v = twice_plus_one(h.c.v);
        if (h.w[3].x == 0xfe) {
            // structure values (p4c's gauntlet_hdr_in_value): members of initializers
            h.w[3].x = mix({ { 9 }, { 0, 0, 0, 50 } }) + mix({ h.w[2], h.c });
        }
        sm.egress_spec = 1;
    }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.c); p.emit(h.w); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


@pytest.fixture(scope="module")
def dev() -> Device:
    d = Device()
    d.install(Device.build_pipeline(compiler.compile_source(PROGRAM, "fn.p4").bmv2_json))
    return d


@pytest.mark.parametrize("i, j, k, v", [(0, 0, 0, 1), (5, 2, 9, 0x40), (3, 7, 255, 0x81)])
def test_calls_in_left_sides_and_statements(dev: Device, i: int, j: int, k: int,
                                            v: int) -> None:
    w = [0x10, 0x20, 0x30, 0x40]
    want = list(w)
    want[i & 3] |= v                    # one postincr: i + 1 afterwards
    want[j & 3] = (j + 16) & 0xFF       # postincr returns the old j; the index used the old j
    head = bytes([(i + 1) & 0xFF, (j + 1) & 0xFF, (k + 1) & 0xFF, (2 * v + 1) & 0xFF])
    out = dev.process(0, bytes([i, j, k, v]) + bytes(w))
    assert out == [(1, head + bytes(want))]


def test_members_of_structure_values(dev: Device) -> None:
    # w[3] = (50 - 9) + (c.v - w[2].x), c.v being 2 * 0x30 + 1 = 0x61 by then: 41 + 0x61 - 7.
    out = dev.process(0, bytes([0, 1, 0, 0x30]) + bytes([1, 2, 7, 0xFE]))
    assert out == [(1, bytes([1, 2, 1, 0x61]) + bytes([1 | 0x30, 17, 7, (41 + 0x61 - 7) & 0xFF]))]
