// Header stacks indexed at run time and a stack of header unions, as real p4c writes them
// (compiled into tests/switch_p4/p4c/).
#include <core.p4>
#include <v1model.p4>

header ix_t { bit<8> i; bit<8> j; bit<8> v; bit<8> t; }
header e_t  { bit<8> a; }
header b_t  { bit<8> d; }
header s_t  { bit<16> d; }
header_union U { b_t byte; s_t short; }

struct headers { ix_t ix; e_t[3] hs; U[2] u; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ix);
        pkt.extract(hdr.hs.next);
        pkt.extract(hdr.hs.next);
        pkt.extract(hdr.u.next.byte);
        transition select(hdr.u.last.byte.d) {
            1: more_short;
            default: more_byte;
        }
    }
    state more_short { pkt.extract(hdr.u.next.short); transition accept; }
    state more_byte { pkt.extract(hdr.u.next.byte); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        hdr.hs[hdr.ix.i].a = hdr.hs[hdr.ix.i].a + 8w0x10;
        hdr.hs[hdr.ix.j].setValid();
        hdr.ix.v = hdr.hs[hdr.ix.i].isValid() ? 8w1 : 8w0;
        if (hdr.ix.t == 1) {
            hdr.u[1].short.setValid();
            hdr.u[1].short.d = 16w0xbeef;
        } else if (hdr.ix.t == 2) {
            hdr.u.pop_front(1);
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
