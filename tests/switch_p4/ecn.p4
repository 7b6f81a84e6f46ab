/* ECN marking on queue depth (the p4lang tutorials' ECN exercise, written for netsum's tests):
   IPv4 packets are forwarded by a table; egress sets the ECN field to CE (3) when the packet
   found at least ECN_THRESHOLD packets in its egress queue and its ECN field says ECT (1, 2). */
#include <core.p4>
#include <v1model.p4>

const bit<19> ECN_THRESHOLD = 10;

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<6> dscp; bit<2> ecn; bit<16> total_len;
    bit<16> identification; bit<3> flags; bit<13> frag_offset; bit<8> ttl; bit<8> protocol;
    bit<16> checksum; bit<32> src; bit<32> dst;
}
struct headers { ethernet_t eth; ipv4_t ipv4; }
struct metadata { }

parser EcnParser(packet_in pkt, out headers hdr, inout metadata meta,
                 inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control EcnVerify(inout headers hdr, inout metadata meta) { apply { } }

control EcnIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action forward(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table ipv4_fwd {
        key = { hdr.ipv4.dst: lpm; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply { if (hdr.ipv4.isValid()) { ipv4_fwd.apply(); } else { drop(); } }
}

control EcnEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action mark_ecn() { hdr.ipv4.ecn = 3; }
    apply {
        if (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2) {
            if (sm.enq_qdepth >= ECN_THRESHOLD) {
                mark_ecn();
            }
        }
    }
}

control EcnCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.checksum, HashAlgorithm.csum16);
    }
}

control EcnDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.ipv4); }
}

V1Switch(EcnParser(), EcnVerify(), EcnIngress(), EcnEgress(), EcnCompute(), EcnDeparser()) main;
