// Variable-length fields as real p4c writes them (compiled into tests/switch_p4/p4c/):
// two option headers whose varbit data is extracted at widths taken from a length header,
// swapped through a varbit local, compared, covered by a checksum with the payload, and the
// parser error reported in a header field.
#include <core.p4>
#include <v1model.p4>

header len_t { bit<8> n1; bit<8> n2; bit<8> err; bit<8> same; }
header opt_t { bit<8> kind; varbit<32> data; }
header ck_t  { bit<16> c; }

struct headers { len_t len; opt_t o1; opt_t o2; ck_t ck; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.len);
        pkt.extract(hdr.o1, (bit<32>)hdr.len.n1 << 3);
        pkt.extract(hdr.o2, (bit<32>)hdr.len.n2 << 3);
        pkt.extract(hdr.ck);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    varbit<32> tmp;
    apply {
        if (sm.parser_error == error.NoError) {
            hdr.len.err = 0;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.len.err = 1;
        } else if (sm.parser_error == error.HeaderTooShort) {
            hdr.len.err = 4;
        } else if (sm.parser_error == error.ParserInvalidArgument) {
            hdr.len.err = 6;
        } else {
            hdr.len.err = 9;
        }
        hdr.len.same = hdr.o1.data == hdr.o2.data ? 8w1 : 8w0;
        if (hdr.o2.isValid()) {
            tmp = hdr.o1.data;
            hdr.o1.data = hdr.o2.data;
            hdr.o2.data = tmp;
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control CC(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum_with_payload(hdr.ck.isValid(), { hdr.o1.kind, hdr.o1.data, hdr.o2.data },
                                     hdr.ck.c, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.len); pkt.emit(hdr.o1); pkt.emit(hdr.o2); pkt.emit(hdr.ck); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
