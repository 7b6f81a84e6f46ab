/* Controls applied inside controls (p4c inlines them): an ACL control instantiated twice with
   different tables entries, a nested counter control, parameters bound to headers, metadata,
   standard_metadata and a constant. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
struct metadata { bit<8> verdict; bit<8> hits; }
struct headers { ethernet_t eth; }

parser SubParser(packet_in pkt, out headers hdr, inout metadata meta,
                 inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}

control Count(inout metadata meta, in bit<8> step) {
    counter(4, CounterType.packets) seen;
    apply {
        seen.count((bit<32>)step);
        meta.hits = meta.hits + step;
    }
}

control Acl(in bit<48> addr, inout metadata meta) {
    Count() tally;
    action deny() { meta.verdict = 1; }
    action allow() { meta.verdict = 0; }
    table rules {
        key = { addr: exact; }
        actions = { deny; allow; }
        default_action = allow();
    }
    apply {
        if (rules.apply().hit) {
            tally.apply(meta, 1);
        }
    }
}

control SubVerify(inout headers hdr, inout metadata meta) { apply { } }

control SubIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Acl() src_acl;
    Acl() dst_acl;
    apply {
        src_acl.apply(hdr.eth.src, meta);
        if (meta.verdict == 0) {
            dst_acl.apply(hdr.eth.dst, meta);
        }
        if (meta.verdict == 1) {
            mark_to_drop(sm);
        } else {
            sm.egress_spec = 2;
        }
    }
}

control SubEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control SubCompute(inout headers hdr, inout metadata meta) { apply { } }

control SubDeparser(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.eth); } }

V1Switch(SubParser(), SubVerify(), SubIngress(), SubEgress(), SubCompute(), SubDeparser()) main;
