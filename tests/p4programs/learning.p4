// A learning L2 switch for the P4Runtime digest and idle-timeout tests
// (tests/e2e/test_p4rt_learning.py): the first frame from an unknown source MAC sends a
// digest {source MAC, ingress port} to the controller; `smac` ages (support_timeout), so a
// host that stays silent is reported idle and the controller forgets it.  Unknown
// destinations go to the multicast group the controller sets as dmac's default.
#include <core.p4>
#include <v1model.p4>

header eth_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}

struct headers_t { eth_t eth; }
struct meta_t { }

struct learn_t {
    bit<48> mac;
    bit<9>  port;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action learn() {
        digest<learn_t>(1, { hdr.eth.src, sm.ingress_port });
    }
    action known() { }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action flood(bit<16> group) { sm.mcast_grp = group; }
    action discard() { mark_to_drop(sm); }

    table smac {
        key = { hdr.eth.src: exact; }
        actions = { learn; known; }
        const default_action = learn();
        size = 1024;
        support_timeout = true;
    }
    table dmac {
        key = { hdr.eth.dst: exact; }
        actions = { forward; flood; discard; }
        default_action = discard();
        size = 1024;
    }
    apply {
        smac.apply();
        dmac.apply();
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        // Never flood a frame back out of the port it came in on.
        if (sm.egress_port == sm.ingress_port) {
            mark_to_drop(sm);
        }
    }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }

control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
