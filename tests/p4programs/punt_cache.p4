// A flow cache in the manner of the p4lang tutorials' flowcache exercise, written for the
// P4Runtime idle-timeout test (tests/e2e/test_p4rt_punt_cache.py): an IPv4 packet whose flow
// (protocol, source, destination) has no entry goes to the CPU port with a packet_in header
// (its ingress port); the controller installs an entry with an idle timeout and sends the
// packet back as a PacketOut naming the egress port.  A flow entry rewrites the destination
// MAC, decrements the TTL when asked and forwards; an idle entry is reported to the
// controller, which deletes it.
#include <core.p4>
#include <v1model.p4>

#define CPU_PORT 64

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> pad;
}

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }

header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id; bit<3> flags;
    bit<13> frag; bit<8> ttl; bit<8> protocol; bit<16> csum; bit<32> src; bit<32> dst;
}

struct headers_t { packet_in_t packet_in; packet_out_t packet_out; ethernet_t eth; ipv4_t ipv4; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) {
            CPU_PORT: packet_out;
            default: ethernet;
        }
    }
    state packet_out { pkt.extract(hdr.packet_out); transition ethernet; }
    state ethernet {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action cached(bit<9> port, bit<1> decrement_ttl, bit<48> dst_mac) {
        sm.egress_spec = port;
        hdr.eth.dst = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - (bit<8>)decrement_ttl;
    }
    action punt() {
        sm.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = sm.ingress_port;
        hdr.packet_in.pad = 0;
    }
    table flow_cache {
        key = {
            hdr.ipv4.protocol: exact;
            hdr.ipv4.src: exact;
            hdr.ipv4.dst: exact;
        }
        actions = { cached; punt; }
        default_action = punt();
        support_timeout = true;
        size = 1024;
    }
    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else if (hdr.ipv4.isValid()) {
            flow_cache.apply();
        } else {
            mark_to_drop(sm);
        }
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }

control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.eth);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
