// v1model hash algorithms as real p4c writes them (compiled into tests/switch_p4/p4c/): the
// catalogue check input "123456789" hashed with crc16, crc16_custom, crc32 and crc32_custom.
#include <core.p4>
#include <v1model.p4>
header h_t { bit<72> data; bit<16> c16; bit<16> c16c; bit<32> c32; bit<32> c32c; }
struct headers { h_t h; }
struct metadata { }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        hash(hdr.h.c16, HashAlgorithm.crc16, 16w0, { hdr.h.data }, 32w65536);
        hash(hdr.h.c16c, HashAlgorithm.crc16_custom, 16w0, { hdr.h.data }, 32w65536);
        hash(hdr.h.c32, HashAlgorithm.crc32, 32w0, { hdr.h.data }, 33w0x100000000);
        hash(hdr.h.c32c, HashAlgorithm.crc32_custom, 32w0, { hdr.h.data }, 33w0x100000000);
        sm.egress_spec = 1;
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
