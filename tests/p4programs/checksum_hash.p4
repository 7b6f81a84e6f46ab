/* Checksums and hashes: csum16 verify/update, crc16/crc32/identity hashes into metadata, a
   random number, lookahead and verify in the parser, select with masks, ranges and tuples,
   a serializable enum, errors, const table entries with lpm/ternary keys, and hit/miss. */
#include <core.p4>
#include <v1model.p4>

enum bit<8> Proto { TCP = 6, UDP = 17 }

error { BadVersion }

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id; bit<3> flags;
    bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst;
}
header l4_t { bit<16> sport; bit<16> dport; }

struct metadata {
    bit<16> h16;
    bit<32> h32;
    bit<32> ident;
    bit<8>  coin;
    bit<4>  first_nibble;
    bool    is_l4;
}
struct headers { ethernet_t eth; ipv4_t ipv4; l4_t l4; }

parser CkParser(packet_in pkt, out headers hdr, inout metadata meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x0800: check_version;
            default: accept;
        }
    }
    state check_version {
        meta.first_nibble = pkt.lookahead<bit<4>>();
        transition select(pkt.lookahead<bit<4>>()) {
            4: parse_ipv4;
            default: reject;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.BadVersion);
        transition select(hdr.ipv4.frag, hdr.ipv4.proto) {
            (0, Proto.TCP): parse_l4;
            (0 &&& 0x1FFF, 17): parse_l4;
            (_, 0x80 .. 0x8F): accept;
            default: accept;
        }
    }
    state parse_l4 {
        pkt.extract(hdr.l4);
        meta.is_l4 = true;
        transition accept;
    }
}

control CkVerify(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.len, hdr.ipv4.id,
              hdr.ipv4.flags, hdr.ipv4.frag, hdr.ipv4.ttl, hdr.ipv4.proto, hdr.ipv4.src,
              hdr.ipv4.dst },
            hdr.ipv4.csum, HashAlgorithm.csum16);
    }
}

control CkIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table route {
        key = { hdr.ipv4.dst: lpm; }
        actions = { set_port; drop; }
        default_action = drop();
        const entries = {
            0x0A000000 &&& 0xFF000000: set_port(1);
            0x0A010000 &&& 0xFFFF0000: set_port(2);
        }
    }
    table acl {
        key = { hdr.ipv4.src: ternary; hdr.l4.dport: exact; }
        actions = { drop; NoAction; }
        const default_action = NoAction();
        const entries = {
            (0xC0A80000 &&& 0xFFFF0000, 22): drop();
            (_, 23): drop();
        }
    }
    apply {
        if (sm.parser_error != error.NoError) {
            mark_to_drop(sm);
            exit;
        }
        hash(meta.h16, HashAlgorithm.crc16, 16w0, { hdr.ipv4.src, hdr.ipv4.dst }, 17w65536);
        hash(meta.h32, HashAlgorithm.crc32, 32w0, { hdr.ipv4.src, hdr.ipv4.dst, hdr.l4.sport },
             32w0xFFFFFFFF);
        hash(meta.ident, HashAlgorithm.identity, 32w0, { hdr.ipv4.dst }, 33w0x100000000);
        random(meta.coin, 8w0, 8w255);
        if (route.apply().hit) {
            if (meta.is_l4) {
                acl.apply();
            }
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        }
    }
}

control CkEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control CkCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.len, hdr.ipv4.id,
              hdr.ipv4.flags, hdr.ipv4.frag, hdr.ipv4.ttl, hdr.ipv4.proto, hdr.ipv4.src,
              hdr.ipv4.dst },
            hdr.ipv4.csum, HashAlgorithm.csum16);
    }
}

control CkDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.ipv4); pkt.emit(hdr.l4); }
}

V1Switch(CkParser(), CkVerify(), CkIngress(), CkEgress(), CkCompute(), CkDeparser()) main;
