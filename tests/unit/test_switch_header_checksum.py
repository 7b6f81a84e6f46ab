"""A calculation over a whole header (BMv2 JSON input {"type": "header"}, what real p4c emits
for e.g. finsy's int.json), against the checksum worked out by hand from the frame's bytes:
bmv2 deparses the header when it is valid and adds nothing when it is not."""
from __future__ import annotations

import json

from netsum import p4c as compiler
from p4helpers import crc16_arc
from netsum.switch.device import Device

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header a_t { bit<16> x; bit<8> y; bit<8> z; bit<16> csum; }
header b_t { bit<32> w; }
struct hs { a_t a; b_t b; }
struct m { }
parser P(packet_in p, out hs h, inout m meta, inout standard_metadata_t sm) {
    state start { p.extract(h.a); transition select(h.a.y) { 1: get_b; default: accept; } }
    state get_b { p.extract(h.b); transition accept; }
}
control V(inout hs h, inout m meta) { apply { } }
control I(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { sm.egress_spec = 2; } }
control E(inout hs h, inout m meta, inout standard_metadata_t sm) { apply { } }
control C(inout hs h, inout m meta) {
    apply { update_checksum(true, { h.b.w }, h.a.csum, HashAlgorithm.csum16); }
}
control D(packet_out p, in hs h) { apply { p.emit(h.a); p.emit(h.b); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def csum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF




def test_checksum_over_a_whole_header_counts_it_only_when_valid() -> None:
    doc = compiler.compile_source(PROGRAM).bmv2_json
    (calc,) = [c for c in doc["calculations"] if c["algo"] == "csum16"]
    calc["input"] = [{"type": "header", "value": "b"}]      # as real p4c writes `{ h.b }`
    dev = Device()
    dev.install(Device.build_pipeline(json.dumps(doc)))
    # b valid (y == 1): the checksum covers b's 4 bytes.
    frame = bytes.fromhex("1234" "01" "07" "0000" "deadbeef") + b"rest"
    ((port, out),) = dev.process(1, frame)
    assert port == 2
    assert int.from_bytes(out[4:6], "big") == csum16(bytes.fromhex("deadbeef"))
    # b invalid (y == 2): the header adds nothing, the checksum of no bytes is 0xffff.
    frame = bytes.fromhex("1234" "02" "07" "0000") + b"rest"
    ((_, out),) = dev.process(1, frame)
    assert int.from_bytes(out[4:6], "big") == 0xFFFF


def test_hash_over_a_field_and_a_header_skips_the_invalid_header() -> None:
    # With crc16 the length matters: an invalid header must add no bytes, not zeros.
    assert crc16_arc(b"123456789") == 0xBB3D                # the algorithm's check value
    doc = compiler.compile_source(PROGRAM).bmv2_json
    (calc,) = [c for c in doc["calculations"] if c["algo"] == "csum16"]
    calc["algo"] = "crc16"
    calc["input"] = [{"type": "field", "value": ["a", "x"]}, {"type": "header", "value": "b"}]
    dev = Device()
    dev.install(Device.build_pipeline(json.dumps(doc)))
    ((_, out),) = dev.process(1, bytes.fromhex("1234" "01" "07" "0000" "deadbeef"))
    assert int.from_bytes(out[4:6], "big") == crc16_arc(bytes.fromhex("1234deadbeef"))
    ((_, out),) = dev.process(1, bytes.fromhex("1234" "02" "07" "0000"))
    assert int.from_bytes(out[4:6], "big") == crc16_arc(bytes.fromhex("1234"))
