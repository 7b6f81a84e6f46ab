/* STF runner test program: state the control plane writes and reads - a register, an
   indirect counter, a table with a direct counter - so that register_write/register_reset,
   counter_write, check_counter (by index and by entry id) and remove all are exercised. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
/* The request names a cell; the reply carries the register value and the table's result. */
header cell_t { bit<8> idx; bit<32> val; bit<8> hit; }
struct metadata { }
struct headers { ethernet_t eth; cell_t cell; }

parser SParser(packet_in pkt, out headers hdr, inout metadata meta,
               inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x88b7: parse_cell;
            default: accept;
        }
    }
    state parse_cell { pkt.extract(hdr.cell); transition accept; }
}

control SVerify(inout headers hdr, inout metadata meta) { apply { } }

control SIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<32>>(4) cells;
    counter(4, CounterType.packets) per_cell;
    direct_counter(CounterType.packets) lookups;

    action hit(bit<8> v) { hdr.cell.hit = v; lookups.count(); }
    table lookup {
        key = { hdr.cell.idx: exact; }
        actions = { hit; NoAction; }
        counters = lookups;
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = sm.ingress_port;
        if (hdr.cell.isValid()) {
            bit<32> i = (bit<32>) hdr.cell.idx;
            cells.read(hdr.cell.val, i);
            per_cell.count(i);
            lookup.apply();
        }
    }
}

control SEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control SCompute(inout headers hdr, inout metadata meta) { apply { } }

control SDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.cell); }
}

V1Switch(SParser(), SVerify(), SIngress(), SEgress(), SCompute(), SDeparser()) main;
