"""Table properties whose output is pinned by what real p4c emits for them (read off p4c's
output shipped with public programs: finsy's flowcache.json / .p4info.txtpb for `size = 0`,
finsy's l2_switch.p4info.txtpb for `support_timeout = true`, finsy's ngsdn main.json and
.p4info.txtpb for a direct counter written inside the table with `@name`: named by the
annotation as written, without the control's prefix)."""
from __future__ import annotations

from p4.config.v1 import p4info_pb2

from netsum import p4c as compiler

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> f; }
struct hs { h_t h; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.h); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    table zero { key = { h.h.f: exact; } actions = { NoAction; } size = 0; }
    table ages { key = { h.h.f: exact; } actions = { NoAction; } support_timeout = true; }
    table plain { key = { h.h.f: exact; } actions = { NoAction; } size = 7; }
    table counted {
        key = { h.h.f: exact; }
        actions = { NoAction; }
        @name("counted_counter")
        counters = direct_counter(CounterType.packets_and_bytes);
    }
    apply { zero.apply(); ages.apply(); plain.apply(); counted.apply(); }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out p, in hs h) { apply { p.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_size_zero_is_the_default_size_and_support_timeout_notifies() -> None:
    res = compiler.compile_source(PROGRAM)
    tables = {t["name"]: t for t in res.bmv2_json["pipelines"][0]["tables"]}
    info = {t.preamble.name: t for t in res.p4info.tables}
    # p4c: `size = 0` gives max_size 1024 in the JSON and size 1024 in P4Info.
    assert tables["I.zero"]["max_size"] == 1024 and info["I.zero"].size == 1024
    assert tables["I.plain"]["max_size"] == 7 and info["I.plain"].size == 7
    assert tables["I.ages"]["support_timeout"] is True
    assert info["I.ages"].idle_timeout_behavior == p4info_pb2.Table.NOTIFY_CONTROL
    assert info["I.zero"].idle_timeout_behavior == p4info_pb2.Table.NO_TIMEOUT


def test_direct_counter_written_in_the_table_is_named_by_its_annotation() -> None:
    res = compiler.compile_source(PROGRAM)
    (dc,) = [c for c in res.bmv2_json["counter_arrays"] if c["is_direct"]]
    assert (dc["name"], dc["binding"]) == ("counted_counter", "I.counted")
    (pc,) = res.p4info.direct_counters
    table = next(t for t in res.p4info.tables if t.preamble.name == "I.counted")
    assert pc.preamble.name == "counted_counter" and pc.direct_table_id == table.preamble.id
    assert list(table.direct_resource_ids) == [pc.preamble.id]
    assert pc.spec.unit == p4info_pb2.CounterSpec.BOTH


NEW_TYPES = """
#include <core.p4>
#include <v1model.p4>
typedef bit<16> PortIdUint_t;
@p4runtime_translation("p4.org/psa/v1/PortId1_t", 32)
type PortIdUint_t PortId1_t;
@p4runtime_translation("p4.org/psa/v1/PortId2_t", bit<32>)
type PortIdUint_t PortId2_t;
@p4runtime_translation("p4.org/psa/v1/PortId3_t", string)
type PortIdUint_t PortId3_t;
type bit<8> Plain_t;
typedef Plain_t PlainAlias_t;
header ports_t { PortId1_t port1; PortId2_t port2; PortId3_t port3; PlainAlias_t p; }
struct hs { ports_t ports; }
struct m { }
parser P(packet_in pk, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { pk.extract(h.ports); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    action a(Plain_t x, PortId1_t y) { h.ports.p = x; h.ports.port1 = y; }
    table t {
        key = { h.ports.port1: exact; h.ports.port2: exact; h.ports.port3: exact;
                h.ports.p: exact; }
        actions = { a; NoAction; }
    }
    apply { t.apply(); }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out pk, in hs h) { apply { pk.emit(h.ports); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_new_types_carry_type_name_and_translated_width() -> None:
    # As p4c writes issue2283_1-bmv2's P4Info: a translated key has the SDN width (32, also
    # when written bit<32>), a string-translated one no width, each names its type; a type
    # reached through a typedef is named by the type.
    info = compiler.compile_source(NEW_TYPES).p4info
    (t,) = info.tables
    assert [(f.name, f.bitwidth, f.type_name.name) for f in t.match_fields] == [
        ("h.ports.port1", 32, "PortId1_t"), ("h.ports.port2", 32, "PortId2_t"),
        ("h.ports.port3", 0, "PortId3_t"), ("h.ports.p", 8, "Plain_t")]
    a = next(x for x in info.actions if x.preamble.name == "I.a")
    assert [(p.name, p.bitwidth, p.type_name.name) for p in a.params] == [
        ("x", 8, "Plain_t"), ("y", 32, "PortId1_t")]
    nt = info.type_info.new_types
    assert (nt["PortId1_t"].translated_type.uri, nt["PortId1_t"].translated_type.sdn_bitwidth) \
        == ("p4.org/psa/v1/PortId1_t", 32)
    assert nt["PortId3_t"].translated_type.HasField("sdn_string")
    assert nt["Plain_t"].original_type.bitstring.bit.bitwidth == 8
    assert sorted(nt) == ["Plain_t", "PortId1_t", "PortId2_t", "PortId3_t"]


CTOR = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> v; bit<8> w; }
struct hs { h_t h; }
struct m { }
parser P(packet_in pk, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control Step(inout bit<8> x);
control Add(inout bit<8> x)(bit<8> k) { apply { x = x + k; } }
control Twice(inout bit<8> x)(Step s) { apply { s.apply(x); s.apply(x); } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    Add(3) add3;
    Add(5) add5;
    Twice(add5) twice5;
    apply { add3.apply(h.h.v); twice5.apply(h.h.w); sm.egress_spec = 1; }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out pk, in hs h) { apply { pk.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_control_constructor_parameters_bind_constants_and_instances() -> None:
    # p4c's issue1566-bmv2 shape: a control instance passed to another control's
    # constructor and applied there; and constants as constructor arguments.
    from netsum.switch.device import Device
    d = Device()
    d.install(Device.build_pipeline(compiler.compile_source(CTOR).bmv2_json))
    ((port, out),) = d.process(2, bytes([10, 20]))
    assert port == 1 and out == bytes([10 + 3, 20 + 5 + 5])


LOOKAHEAD = """
#include <core.p4>
#include <v1model.p4>
struct pair_t { bit<16> a; bit<16> b; }
struct hs { }
struct m { }
parser P(packet_in pk, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { pk.lookahead<pair_t>(); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    apply { if (sm.parser_error != error.NoError) { mark_to_drop(sm); } else { sm.egress_spec = 1; } }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out pk, in hs h) { apply { } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_lookahead_as_a_statement_still_needs_the_bits() -> None:
    # p4c's issue1768-bmv2: the value is dropped, but fewer than 32 bits left in the packet
    # is PacketTooShort (the program then drops it); the packet itself is not consumed.
    from netsum.switch.device import Device
    d = Device()
    d.install(Device.build_pipeline(compiler.compile_source(LOOKAHEAD).bmv2_json))
    assert d.process(0, b"\x00\x01\x02") == []
    assert d.process(0, b"\x00\x01\x02\x03\x04") == [(1, b"\x00\x01\x02\x03\x04")]


SKIP = """
#include <core.p4>
#include <v1model.p4>
header skip_t { bit<16> a; bit<8> b; }
header keep_t { bit<8> k; }
struct hs { keep_t keep; }
struct m { }
parser P(packet_in pk, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { pk.extract<skip_t>(_); pk.extract(h.keep); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) {
    apply { if (sm.parser_error != error.NoError) { mark_to_drop(sm); } else { sm.egress_spec = 1; } }
}
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) { apply { } }
control D(packet_out pk, in hs h) { apply { pk.emit(h.keep); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_extract_into_dont_care_skips_the_header() -> None:
    # p4c's issue774-4-bmv2: extract<H>(_) consumes H's 3 bytes (they are not re-emitted);
    # a packet shorter than H is PacketTooShort.
    from netsum.switch.device import Device
    d = Device()
    d.install(Device.build_pipeline(compiler.compile_source(SKIP).bmv2_json))
    assert d.process(0, bytes([1, 2, 3, 4, 5, 6])) == [(1, bytes([4, 5, 6]))]
    assert d.process(0, bytes([1, 2])) == []
