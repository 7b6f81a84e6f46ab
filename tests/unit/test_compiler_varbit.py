"""varbit variables and parameter copies, laid out as p4c lays them out
(backends/bmv2/common/header.cpp): each is a metadata header of its own, of type
`$varbit<N>` with one variable-length field `field` (a BMv2 header holds one varbit field at
most), written with `assign_VL`.  Expected packets are worked out by hand; p4c's
issue447-5-bmv2 STF test (a swap through a varbit local) passes too.

Deliberate miscompile these tests caught: every varbit variable sharing one `$varbit32`
header instance (a swap through a temporary then duplicates one value)."""
from __future__ import annotations

import pytest

from netsum import p4c as compiler
from netsum.switch.device import Device

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header f_t { bit<8> mode; }
header h_t { bit<8> len; varbit<32> v; }
struct hs { f_t f; h_t h1; h_t h2; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    // Each h_t is a length byte (in bytes) and that many bytes of v.
    state start {
        p.extract(h.f);
        p.extract(h.h1, (bit<32>)p.lookahead<bit<8>>() * 8);
        p.extract(h.h2, (bit<32>)p.lookahead<bit<8>>() * 8);
        transition accept;
    }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    action swap(inout varbit<32> a, inout varbit<32> b) {
        varbit<32> t = a;
        a = b;
        b = t;
    }
    apply {
        varbit<32> keep;
        if (h.f.mode == 1) {
            swap(h.h1.v, h.h2.v);
        } else {
            keep = h.h1.v;
            h.h1.v = h.h2.v;
            h.h2.v = keep;
        }
        sm.egress_spec = 1;
    }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.f); p.emit(h.h1); p.emit(h.h2); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


@pytest.fixture(scope="module")
def res() -> compiler.CompileResult:
    return compiler.compile_source(PROGRAM, "vb.p4")


def test_each_varbit_variable_is_a_metadata_header_of_its_own(res: compiler.CompileResult) -> None:
    types = {t["name"]: t for t in res.bmv2_json["header_types"]}
    assert types["$varbit32"]["fields"] == [["field", "*"]]
    assert types["$varbit32"]["max_length"] == 4
    mine = [h for h in res.bmv2_json["headers"] if h["header_type"] == "$varbit32"]
    # keep, the action's t and the copies of a and b: four instances, all metadata.
    assert len(mine) == 4 and all(h["metadata"] for h in mine)
    assert len({h["name"] for h in mine}) == 4
    prims = [p for a in res.bmv2_json["actions"] for p in a["primitives"]]
    assert prims and all(p["op"] == "assign_VL" for p in prims
                         if "field" in str(p["parameters"]) and "'v'" in str(p["parameters"]))


@pytest.mark.parametrize("mode", [0, 1])     # 0: through a local; 1: through the action
@pytest.mark.parametrize("first, second", [
    (b"\x01\xaa", b"\x02\xbb\xcc"),
    (b"\x00", b"\x04\x01\x02\x03\x04"),
    (b"\x03\x10\x20\x30", b"\x00"),
])
def test_varbit_values_trade_places(res: compiler.CompileResult, mode: int, first: bytes,
                                    second: bytes) -> None:
    # The length bytes stay where they were; each varbit value moves with its own length.
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    out = d.process(0, bytes([mode]) + first + second + b"\xee")
    assert out == [(1, bytes([mode]) + first[:1] + second[1:] + second[:1] + first[1:] + b"\xee")]
