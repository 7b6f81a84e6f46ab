/* Error case: push_front in a parser (P4_16 / p4c: controls only). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header label_t { bit<20> label; bit<3> tc; bit<1> bos; bit<8> ttl; }
struct metadata { bit<32> idx; bit<20> label; }
struct headers { ethernet_t eth; label_t[4] labels; }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x8847: parse_label;
            default: accept;
        }
    }
    state parse_label {
        hdr.labels.push_front(1);
        pkt.extract(hdr.labels.next);
        transition select(hdr.labels.last.bos) {
            0: parse_label;
            default: accept;
        }
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.labels); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
