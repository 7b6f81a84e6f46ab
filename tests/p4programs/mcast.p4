/* Multicast and cloning: a flood group chosen per ingress port, per-replica egress rewrite
   keyed on egress_rid, an ingress-to-egress clone for mirroring, a switch on action_run and
   a table miss handled in apply. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header mirror_t { bit<8> reason; bit<8> port_lo; }

struct metadata { bit<8> reason; }
struct headers { ethernet_t eth; mirror_t mirror; }

const bit<32> I2E_CLONE = 1;

parser McParser(packet_in pkt, out headers hdr, inout metadata meta,
                inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}

control McVerify(inout headers hdr, inout metadata meta) { apply { } }

control McIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action unicast(bit<9> port) { sm.egress_spec = port; }
    action flood(bit<16> mgid) { sm.mcast_grp = mgid; }
    action mirror_and_flood(bit<16> mgid, bit<32> session) {
        sm.mcast_grp = mgid;
        meta.reason = 7;
        clone(CloneType.I2E, session);
    }
    action drop() { mark_to_drop(sm); }

    table l2 {
        key = { hdr.eth.dst: exact; }
        actions = { unicast; flood; mirror_and_flood; drop; }
        default_action = flood(1);
    }
    table port_flood {
        key = { sm.ingress_port: exact; }
        actions = { flood; NoAction; }
        default_action = NoAction();
    }

    apply {
        switch (l2.apply().action_run) {
            unicast: {
                if (sm.egress_spec == sm.ingress_port) {
                    drop();
                }
            }
            flood:
            mirror_and_flood: {
                if (!port_flood.apply().hit) {
                    sm.mcast_grp = 1;
                }
            }
        }
    }
}

control McEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action rewrite_dst(bit<48> dst) { hdr.eth.dst = dst; }
    action add_mirror() {
        hdr.mirror.setValid();
        hdr.mirror.reason = 1;
        hdr.mirror.port_lo = sm.ingress_port[7:0];
    }
    table per_replica {
        key = { sm.egress_rid: exact; sm.egress_port: exact; }
        actions = { rewrite_dst; NoAction; }
        default_action = NoAction();
    }
    apply {
        if (sm.instance_type == 1) {
            add_mirror();
        } else if (sm.egress_port == sm.ingress_port) {
            mark_to_drop(sm);
            exit;
        } else {
            per_replica.apply();
        }
    }
}

control McCompute(inout headers hdr, inout metadata meta) { apply { } }

control McDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.mirror); }
}

V1Switch(McParser(), McVerify(), McIngress(), McEgress(), McCompute(), McDeparser()) main;
