/* Constructs from the p4lang tutorials that the other test programs do not cover: source
   routing over a header stack (.next, .last, pop_front), MRI-style nested metadata structs
   counted down in the parser, a firewall bloom filter (hash of action parameters into
   registers, an action called from apply with run-time arguments), ECMP with a hash whose
   base and count are table parameters, and a local variable in apply. */
#include <core.p4>
#include <v1model.p4>

#define MAX_HOPS 4
#define BLOOM_ENTRIES 4096

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header srcRoute_t { bit<1> bos; bit<15> port; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header tcp_t { bit<16> srcPort; bit<16> dstPort; }

struct parser_metadata_t { bit<16> remaining; }
struct ecmp_metadata_t { bit<14> sel; }
struct metadata {
    parser_metadata_t parser_metadata;
    ecmp_metadata_t ecmp;
    bit<32> pos1;
    bit<32> pos2;
}
struct headers {
    ethernet_t ethernet;
    srcRoute_t[MAX_HOPS] srcRoutes;
    ipv4_t ipv4;
    tcp_t tcp;
}

parser MixParser(packet_in packet, out headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        meta.parser_metadata.remaining = MAX_HOPS;
        transition select(hdr.ethernet.etherType) {
            0x1234: parse_srcRouting;
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_srcRouting {
        packet.extract(hdr.srcRoutes.next);
        meta.parser_metadata.remaining = meta.parser_metadata.remaining - 1;
        transition select(hdr.srcRoutes.last.bos) {
            1: parse_ipv4;
            default: parse_srcRouting;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            6: parse_tcp;
            default: accept;
        }
    }
    state parse_tcp { packet.extract(hdr.tcp); transition accept; }
}

control MixVerify(inout headers hdr, inout metadata meta) { apply { } }

control MixIngress(inout headers hdr, inout metadata meta,
                   inout standard_metadata_t standard_metadata) {
    register<bit<1>>(BLOOM_ENTRIES) bloom_1;
    register<bit<1>>(BLOOM_ENTRIES) bloom_2;

    action drop() { mark_to_drop(standard_metadata); }

    action srcRoute_nhop() {
        standard_metadata.egress_spec = (bit<9>)hdr.srcRoutes[0].port;
        hdr.srcRoutes.pop_front(1);
    }

    action compute_hashes(bit<32> ipAddr1, bit<32> ipAddr2, bit<16> port1, bit<16> port2) {
        hash(meta.pos1, HashAlgorithm.crc16, (bit<32>)0,
             { ipAddr1, ipAddr2, port1, port2, hdr.ipv4.protocol }, (bit<32>)BLOOM_ENTRIES);
        hash(meta.pos2, HashAlgorithm.crc32, (bit<32>)0,
             { ipAddr1, ipAddr2, port1, port2, hdr.ipv4.protocol }, (bit<32>)BLOOM_ENTRIES);
    }

    action set_ecmp_select(bit<16> ecmp_base, bit<32> ecmp_count) {
        hash(meta.ecmp.sel, HashAlgorithm.crc16, ecmp_base,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol, hdr.tcp.srcPort,
               hdr.tcp.dstPort }, ecmp_count);
    }
    action set_nhop(bit<9> port) { standard_metadata.egress_spec = port; }

    table ecmp_group {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { drop; set_ecmp_select; }
        default_action = drop();
    }
    table ecmp_nhop {
        key = { meta.ecmp.sel: exact; }
        actions = { drop; set_nhop; }
        default_action = drop();
    }

    apply {
        if (hdr.srcRoutes[0].isValid()) {
            srcRoute_nhop();
        } else if (hdr.ipv4.isValid()) {
            bit<1> seen_1;
            bit<1> seen_2;
            if (hdr.tcp.isValid()) {
                compute_hashes(hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.tcp.srcPort,
                               hdr.tcp.dstPort);
                bloom_1.read(seen_1, meta.pos1);
                bloom_2.read(seen_2, meta.pos2);
                if (seen_1 != 1 || seen_2 != 1) {
                    bloom_1.write(meta.pos1, 1);
                    bloom_2.write(meta.pos2, 1);
                }
            }
            ecmp_group.apply();
            ecmp_nhop.apply();
        }
    }
}

control MixEgress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) { apply { } }

control MixCompute(inout headers hdr, inout metadata meta) { apply { } }

control MixDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.srcRoutes);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
    }
}

V1Switch(MixParser(), MixVerify(), MixIngress(), MixEgress(), MixCompute(), MixDeparser()) main;
