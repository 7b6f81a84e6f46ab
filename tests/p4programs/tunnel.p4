/* Tunnel encapsulation in the style of the p4lang "basic_tunnel" tutorial: a custom tunnel
   header selected by EtherType, encap (setValid) at the ingress edge, decap (setInvalid) at
   the egress edge, forwarding on the tunnel id. */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_MYTUNNEL = 0x1212;
const bit<16> TYPE_IPV4 = 0x800;

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header myTunnel_t { bit<16> proto_id; bit<16> dst_id; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}

struct metadata { bit<16> tunnel_id; bool encapped; }
struct headers {
    ethernet_t ethernet;
    myTunnel_t myTunnel;
    ipv4_t ipv4;
}

parser TunnelParser(packet_in packet, out headers hdr, inout metadata meta,
                    inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_MYTUNNEL: parse_myTunnel;
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_myTunnel {
        packet.extract(hdr.myTunnel);
        transition select(hdr.myTunnel.proto_id) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control TunnelVerify(inout headers hdr, inout metadata meta) { apply { } }

control TunnelIngress(inout headers hdr, inout metadata meta,
                      inout standard_metadata_t standard_metadata) {
    action drop() { mark_to_drop(standard_metadata); }

    action encap(bit<16> dst_id) {
        hdr.myTunnel.setValid();
        hdr.myTunnel.dst_id = dst_id;
        hdr.myTunnel.proto_id = hdr.ethernet.etherType;
        hdr.ethernet.etherType = TYPE_MYTUNNEL;
        meta.encapped = true;
    }
    action ipv4_forward(bit<48> dstAddr, bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; encap; drop; NoAction; }
        size = 1024;
        default_action = NoAction();
    }

    action myTunnel_forward(bit<9> port) { standard_metadata.egress_spec = port; }
    table myTunnel_exact {
        key = { hdr.myTunnel.dst_id: exact; }
        actions = { myTunnel_forward; drop; }
        size = 1024;
        default_action = drop();
    }

    apply {
        if (hdr.ipv4.isValid() && !hdr.myTunnel.isValid()) {
            ipv4_lpm.apply();
            if (meta.encapped) {
                meta.tunnel_id = hdr.myTunnel.dst_id;
            }
        }
        if (hdr.myTunnel.isValid()) {
            myTunnel_exact.apply();
        }
    }
}

control TunnelEgress(inout headers hdr, inout metadata meta,
                     inout standard_metadata_t standard_metadata) {
    action decap() {
        hdr.ethernet.etherType = hdr.myTunnel.proto_id;
        hdr.myTunnel.setInvalid();
    }
    table edge {
        key = { standard_metadata.egress_port: exact; }
        actions = { decap; NoAction; }
        default_action = NoAction();
    }
    apply {
        if (hdr.myTunnel.isValid()) {
            edge.apply();
        }
    }
}

control TunnelCompute(inout headers hdr, inout metadata meta) { apply { } }

control TunnelDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.myTunnel);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(TunnelParser(), TunnelVerify(), TunnelIngress(), TunnelEgress(), TunnelCompute(),
         TunnelDeparser()) main;
