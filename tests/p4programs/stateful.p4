/* Stateful externs and arithmetic: registers (read-modify-write in one action), an indirect
   counter, a direct counter, a meter and a direct meter, `if` inside an action, the ternary
   operator, slices, concatenation, casts, saturating and signed arithmetic. */
#include <core.p4>
#include <v1model.p4>

typedef bit<32> count_t;
const bit<32> FLOWS = 1024;

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header stats_t {
    bit<32> flow;
    bit<32> total;
    bit<8>  color;
    bit<8>  dcolor;
    bit<16> mix;
    int<16> delta;
    bit<8>  sat;
}

struct metadata {
    bit<32> idx;
    count_t old;
    bit<8>  color;
    bit<8>  dcolor;
}
struct headers { ethernet_t eth; stats_t stats; }

parser StParser(packet_in pkt, out headers hdr, inout metadata meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x88B5: parse_stats;
            default: accept;
        }
    }
    state parse_stats { pkt.extract(hdr.stats); transition accept; }
}

control StVerify(inout headers hdr, inout metadata meta) { apply { } }

control StIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<count_t>(FLOWS) totals;
    register<bit<8>>(FLOWS) maxima;
    counter(FLOWS, CounterType.packets_and_bytes) per_flow;
    direct_counter(CounterType.packets) hits;
    meter(FLOWS, MeterType.bytes) rate;
    direct_meter<bit<8>>(MeterType.packets) drate;

    action accumulate() {
        meta.idx = hdr.stats.flow & (FLOWS - 1);
        totals.read(meta.old, meta.idx);
        meta.old = meta.old + 1;
        if (meta.old > 100) {
            meta.old = 100;
            hdr.stats.sat = 1;
        } else {
            hdr.stats.sat = 0;
        }
        totals.write(meta.idx, meta.old);
        hdr.stats.total = meta.old;
        per_flow.count(meta.idx);
        rate.execute_meter(meta.idx, meta.color);
        hdr.stats.color = meta.color;
    }
    action track_max(bit<8> v) {
        bit<8> cur;
        maxima.read(cur, hdr.stats.flow);
        maxima.write(hdr.stats.flow, cur > v ? cur : v);
    }
    action arith() {
        hdr.stats.mix = hdr.eth.src[7:0] ++ hdr.eth.dst[15:8];
        hdr.stats.delta = (int<16>)hdr.stats.mix - 16s3;
        hdr.stats.sat = hdr.stats.sat |+| 255;
        hdr.stats.total = ~hdr.stats.total << 2;
    }
    action mark(bit<9> port) {
        sm.egress_spec = port;
        hits.count();
        drate.read(meta.dcolor);
        hdr.stats.dcolor = meta.dcolor;
    }
    table classify {
        key = { hdr.eth.src: ternary; hdr.stats.flow: range; }
        actions = { mark; NoAction; }
        counters = hits;
        meters = drate;
        default_action = NoAction();
        size = 64;
    }
    apply {
        if (hdr.stats.isValid()) {
            accumulate();
            track_max(hdr.stats.color);
            arith();
            classify.apply();
        }
    }
}

control StEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control StCompute(inout headers hdr, inout metadata meta) { apply { } }

control StDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(StParser(), StVerify(), StIngress(), StEgress(), StCompute(), StDeparser()) main;
