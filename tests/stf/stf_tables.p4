/* STF runner test program: exact, lpm and ternary tables, a default action changed at run
   time, forwarding by ingress port, and an indirect counter per ingress port. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
/* A probe carries the key `addr`/`tag` and gets one result byte per table. */
header probe_t { bit<32> addr; bit<8> tag; bit<8> exact_out; bit<8> lpm_out; bit<8> tern_out; }
struct metadata { }
struct headers { ethernet_t eth; probe_t probe; }

parser TParser(packet_in pkt, out headers hdr, inout metadata meta,
               inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x88b5: parse_probe;
            default: accept;
        }
    }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
}

control TVerify(inout headers hdr, inout metadata meta) { apply { } }

control TIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(8, CounterType.packets_and_bytes) port_in;

    action drop() { mark_to_drop(sm); }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action set_exact(bit<8> v) { hdr.probe.exact_out = v; }
    action set_lpm(bit<8> v) { hdr.probe.lpm_out = v; }
    action set_tern(bit<8> v) { hdr.probe.tern_out = v; }

    table fwd {
        key = { sm.ingress_port: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    table by_tag {
        key = { hdr.probe.tag: exact; }
        actions = { set_exact; NoAction; }
        default_action = NoAction();
    }
    table by_prefix {
        key = { hdr.probe.addr: lpm; }
        actions = { set_lpm; NoAction; }
        default_action = NoAction();
    }
    table by_mask {
        key = { hdr.probe.addr: ternary; }
        actions = { set_tern; NoAction; }
        default_action = NoAction();
    }
    apply {
        port_in.count((bit<32>) sm.ingress_port);
        fwd.apply();
        if (hdr.probe.isValid()) {
            by_tag.apply();
            by_prefix.apply();
            by_mask.apply();
        }
    }
}

control TEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control TCompute(inout headers hdr, inout metadata meta) { apply { } }

control TDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
