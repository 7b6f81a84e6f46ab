// Loops, header unions and table keys as real p4c writes them (compiled into
// tests/switch_p4/p4c/): `for` loops with break and continue inside actions (p4c's backward
// `_jump`), a header union extracted by a select and re-made valid through the other member,
// a const LPM entry written with bits past its prefix (bmv2 masks them), a const entry on a
// key slice and a key on a masked expression (entries written over P4Runtime).
#include <core.p4>
#include <v1model.p4>

header ctl_t { bit<8> kind; bit<8> n; bit<8> lo; bit<8> res; bit<16> tag; bit<32> addr; }
header a_t   { bit<32> x; }
header b_t   { bit<16> y; bit<16> z; }
header_union ab_t { a_t a; b_t b; }

struct headers { ctl_t ctl; ab_t u; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ctl);
        transition select(hdr.ctl.kind) {
            0xa0 &&& 0xf0: get_a;
            0xb0 &&& 0xf0: get_b;
            default: accept;
        }
    }
    state get_a { pkt.extract(hdr.u.a); transition accept; }
    state get_b { pkt.extract(hdr.u.b); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    // res = 1 + 2 + ... + n (mod 256).
    action sum_to_n() {
        bit<8> s = 0;
        for (bit<8> i = 1; i <= hdr.ctl.n; i = i + 1) {
            s = s + i;
        }
        hdr.ctl.res = s;
    }
    // res = the sum of the odd i in lo .. n-1, stopping before the first i with i * i > 60.
    action odd_until_square() {
        bit<8> s = 0;
        for (bit<8> i = hdr.ctl.lo; i < hdr.ctl.n; i = i + 1) {
            if (i * i > 60) {
                break;
            }
            if (i & 1 == 0) {
                continue;
            }
            s = s + i;
        }
        hdr.ctl.res = s;
    }
    action to_port(bit<9> p) { sm.egress_spec = p; }
    action note(bit<8> v) { hdr.ctl.res = hdr.ctl.res + v; }

    table loops {
        key = { hdr.ctl.kind: exact; }
        actions = { sum_to_n; odd_until_square; NoAction; }
        const entries = {
            0x01: sum_to_n();
            0x02: odd_until_square();
        }
        default_action = NoAction();
    }
    // The entry is written 10.1.2.3/8: every 10.x.y.z matches it.
    table route {
        key = { hdr.ctl.addr: lpm; }
        actions = { to_port; }
        const entries = {
            0x0a010203 &&& 0xff000000: to_port(3);
            0x0a0b0000 &&& 0xffff0000: to_port(4);
        }
        default_action = to_port(1);
    }
    table by_slice {
        key = { hdr.ctl.tag[15:8]: exact; }
        actions = { note; NoAction; }
        const entries = { 0x5a: note(0x40); }
        default_action = NoAction();
    }
    // Written over P4Runtime: p4c's P4Info gives the key 16 bits, the JSON the field and a mask.
    table by_mask {
        key = { hdr.ctl.tag & 0x00f0: exact @name("tag_mid"); }
        actions = { note; NoAction; }
        default_action = NoAction();
    }

    apply {
        loops.apply();
        route.apply();
        by_slice.apply();
        by_mask.apply();
        if (hdr.u.a.isValid()) {
            // a becomes b: setting b valid invalidates a (P4_16 8.20).
            hdr.u.b.setValid();
            hdr.u.b.y = 16w0xbbbb;
            hdr.u.b.z = hdr.ctl.tag;
        } else if (hdr.u.b.isValid()) {
            hdr.u.b.z = hdr.u.b.y + hdr.u.b.z;
        }
        if (hdr.u.isValid()) {
            hdr.ctl.kind = hdr.u.a.isValid() ? 8w0xaa : 8w0xbb;
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.ctl); pkt.emit(hdr.u); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
