/* Grab bag: enums (plain and serializable), error-typed metadata, parser locals and advance,
   select with ranges/masks/don't-care, a keyless const-default table, isValid() and slice
   keys with @name, an optional key with const entries, switch with only default, a
   control-level variable with an initializer, signed negation, concatenation, |-|, exit. */
#include <core.p4>
#include <v1model.p4>
enum Color { RED, GREEN }
enum bit<2> Prio { LOW = 0, HIGH = 3 }
header h_t { bit<8> a; bit<8> b; int<8> s; }
struct metadata { bit<8> m; error e; Prio p; bit<32> w; }
struct headers { h_t h; }
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        meta.e = error.NoError;
        bit<8> tmp = hdr.h.a;
        meta.m = tmp + 1;
        pkt.advance(8);
        transition select(hdr.h.a, hdr.h.b) {
            (0 .. 3, _): accept;
            (8w4 &&& 8w0xFC, 1): reject;
            default: accept;
        }
    }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Color c = Color.RED;
    action a1() { meta.p = Prio.HIGH; }
    action a2(bit<8> x) { hdr.h.a = x; if (x == 0) { return; } hdr.h.b = x; }
    table keyless { actions = { a1; } const default_action = a1(); }
    table noact { key = { hdr.h.isValid(): exact; hdr.h.a[3:0]: ternary @name("low"); } actions = { a2; NoAction; } }
    table opt { key = { hdr.h.b: optional; } actions = { a2; } default_action = a2(3); const entries = { 5: a2(1); _: a2(2); } }
    apply {
        keyless.apply();
        switch (noact.apply().action_run) {
            default: { c = Color.GREEN; }
        }
        if (c == Color.GREEN && meta.p == Prio.HIGH) { opt.apply(); }
        hdr.h.s = -hdr.h.s;
        meta.w = hdr.h.a ++ hdr.h.b ++ 16w0 >> 8;
        if (!(hdr.h.s < 0)) { exit; }
        meta.m = meta.m |-| 1;
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
