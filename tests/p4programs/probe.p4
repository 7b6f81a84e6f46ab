/* A link-monitor style probe: the ingress timestamp is kept in a local across a table apply,
 * the hop count and a running sum go through actions with inout parameters, egress stamps
 * its own time.  Written for netsum's compiler tests (every value is checked by hand). */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_PROBE = 0x0812;

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header probe_t {
    bit<8>  hops;
    bit<48> in_ts;
    bit<48> out_ts;
    bit<16> saved_type;
    bit<8>  acc;
    bit<8>  port_seen;
}
struct headers { ethernet_t eth; probe_t probe; }
struct metadata { bit<8> unused; }

parser ProbeParser(packet_in pkt, out headers hdr, inout metadata meta,
                   inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) { TYPE_PROBE: probe; default: accept; }
    }
    state probe { pkt.extract(hdr.probe); transition accept; }
}

control ProbeVerify(inout headers hdr, inout metadata meta) { apply { } }

control ProbeIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port) { sm.egress_spec = port; }
    table fwd {
        key = { sm.ingress_port: exact; }
        actions = { set_port; NoAction; }
        default_action = set_port(2);
    }
    action bump(inout bit<8> h) { h = h + 1; }
    // acc is copied in and out: the two additions see the copy, not hdr.probe.acc.
    action add_twice(inout bit<8> acc, in bit<8> v) { acc = acc + v; acc = acc + v; }
    apply {
        bit<48> t = sm.ingress_global_timestamp;
        bit<16> saved = hdr.eth.etype;
        fwd.apply();
        if (hdr.probe.isValid()) {
            bump(hdr.probe.hops);
            hdr.probe.in_ts = t;
            hdr.probe.saved_type = saved;
            add_twice(hdr.probe.acc, hdr.probe.hops);
            bit<8> p = (bit<8>)sm.egress_spec;
            hdr.probe.port_seen = p;
        }
    }
}

control ProbeEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.probe.isValid()) {
            bit<48> t = sm.egress_global_timestamp;
            hdr.probe.out_ts = t;
        }
    }
}

control ProbeCompute(inout headers hdr, inout metadata meta) { apply { } }

control ProbeDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); }
}

V1Switch(ProbeParser(), ProbeVerify(), ProbeIngress(), ProbeEgress(), ProbeCompute(),
         ProbeDeparser()) main;
