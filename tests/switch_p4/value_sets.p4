// Parser value sets as real p4c writes them (compiled into tests/switch_p4/p4c/): a set of
// bit<16> values and a set of (bit<16>, bit<8>) pairs select whether header g is extracted;
// ingress sends packets with g to port 2 (and copies g.y into h.x), others to port 1.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<16> t; bit<8> x; }
header g_t { bit<8> y; }
struct pair_t { bit<16> t; bit<8> x; }
struct headers { h_t h; g_t g; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) one;
    value_set<pair_t>(2) two;
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.t) { one: get_g; 0x5555: get_g; default: by_pair; }
    }
    state by_pair { transition select(hdr.h.t, hdr.h.x) { two: get_g; default: accept; } }
    state get_g { pkt.extract(hdr.g); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.g.isValid()) {
            hdr.h.x = hdr.g.y;
            sm.egress_spec = 2;
        } else {
            sm.egress_spec = 1;
        }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.g); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
