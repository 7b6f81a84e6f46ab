/* STF runner test program: multicast groups with replication ids and an ingress clone to a
   mirroring session; egress writes what it sees into the frame. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
/* Written by egress: the copy's egress_rid, instance_type and egress_port. */
header seen_t { bit<16> rid; bit<8> kind; bit<8> port; }
struct metadata { }
struct headers { ethernet_t eth; seen_t seen; }

parser RParser(packet_in pkt, out headers hdr, inout metadata meta,
               inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x88b6: parse_seen;
            default: accept;
        }
    }
    state parse_seen { pkt.extract(hdr.seen); transition accept; }
}

control RVerify(inout headers hdr, inout metadata meta) { apply { } }

control RIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action to_group(bit<16> group) { sm.mcast_grp = group; }
    action to_port(bit<9> port) { sm.egress_spec = port; }
    action mirror(bit<9> port, bit<32> session) {
        sm.egress_spec = port;
        clone(CloneType.I2E, session);
    }
    table route {
        key = { hdr.eth.dst: exact; }
        actions = { to_group; to_port; mirror; NoAction; }
        default_action = NoAction();
    }
    apply { route.apply(); }
}

control REgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.seen.isValid()) {
            hdr.seen.rid = sm.egress_rid;
            hdr.seen.kind = (bit<8>) sm.instance_type;
            hdr.seen.port = (bit<8>) sm.egress_port;
        }
    }
}

control RCompute(inout headers hdr, inout metadata meta) { apply { } }

control RDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.seen); }
}

V1Switch(RParser(), RVerify(), RIngress(), REgress(), RCompute(), RDeparser()) main;
