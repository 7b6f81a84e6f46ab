/* Header stacks: MPLS-style labels parsed with .next until bottom-of-stack (.last in the
   select), popped and pushed in actions, indexed with constants, emitted whole. */
#include <core.p4>
#include <v1model.p4>

#define MAX_LABELS 3

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header label_t { bit<20> label; bit<3> tc; bit<1> bos; bit<8> ttl; }

struct metadata { }
struct headers { ethernet_t eth; label_t[MAX_LABELS] labels; }

parser StkParser(packet_in pkt, out headers hdr, inout metadata meta,
                 inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x8847: parse_label;
            default: accept;
        }
    }
    state parse_label {
        pkt.extract(hdr.labels.next);
        transition select(hdr.labels.last.bos) {
            1: accept;
            default: parse_label;
        }
    }
}

control StkVerify(inout headers hdr, inout metadata meta) { apply { } }

control StkIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action pop(bit<9> port) {
        hdr.labels.pop_front(1);
        sm.egress_spec = port;
    }
    action push(bit<20> label, bit<9> port) {
        hdr.labels.push_front(1);
        hdr.labels[0].setValid();
        hdr.labels[0].label = label;
        hdr.labels[0].bos = 0;
        hdr.labels[0].ttl = 64;
        sm.egress_spec = port;
    }
    table lfib {
        key = { hdr.labels[0].label: exact; }
        actions = { pop; push; NoAction; }
        default_action = NoAction();
    }
    apply {
        if (hdr.labels[0].isValid()) {
            lfib.apply();
        }
    }
}

control StkEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control StkCompute(inout headers hdr, inout metadata meta) { apply { } }

control StkDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.labels); }
}

V1Switch(StkParser(), StkVerify(), StkIngress(), StkEgress(), StkCompute(), StkDeparser()) main;
