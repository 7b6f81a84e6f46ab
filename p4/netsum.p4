/* netsum.p4 — in-network aggregation for v1model (SwitchML-style, multi-job, hierarchical).
 *
 * Workers send DATA packets (Ethernet/IPv4/UDP dst NETSUM_UDP_PORT/netsum header/K x int32) to
 * the aggregation service address.  Per job, per slot and per shadow set the switch keeps a
 * worker bitmap, a contribution count, the max block exponent and K partial sums; the last
 * contribution of a round turns the packet into a RESULT multicast to the job's group.  A leaf
 * switch forwards its completed local sum up, as one contributor of the same job at the root, and
 * multicasts the root's RESULT down.  Everything else (ARP, ping, other traffic) is forwarded by
 * an L2 table.  See p4/README.md for the tables, registers, counters and the packet walk.
 *
 * Standard P4_16 for v1model; real p4c (p4c-bm2-ss) compiles it unchanged.  Rules kept for BMv2:
 * every register read-modify-write is inside one action (BMv2 locks the registers per action),
 * no `if` inside actions (decisions are taken in `apply` and pick an action; the exponent max
 * is a borrow-and-mask computation), every register index is range-checked before use.
 *
 * Build-time parameters (cpp, e.g. -DNETSUM_K=64):
 *   NETSUM_K         values per packet: 32 (default) or 64
 *   NETSUM_SLOTS     slots in the shared pool (each has two sets); default 4096
 *   NETSUM_MAX_JOBS  size of the per-job counters; job ids >= this count at index 0
 */
#include <core.p4>
#include <v1model.p4>

#ifndef NETSUM_K
#define NETSUM_K 32
#endif
#ifndef NETSUM_SLOTS
#define NETSUM_SLOTS 4096
#endif
#ifndef NETSUM_MAX_JOBS
#define NETSUM_MAX_JOBS 256
#endif

/* X-macros over the K values: M(header field, register).  Names are spelled out rather than
 * pasted with ## so that the expansion reads the same under every preprocessor. */
#define NS_VALUES_0_31(M) \
    M(v00, val00) M(v01, val01) M(v02, val02) M(v03, val03) \
    M(v04, val04) M(v05, val05) M(v06, val06) M(v07, val07) \
    M(v08, val08) M(v09, val09) M(v10, val10) M(v11, val11) \
    M(v12, val12) M(v13, val13) M(v14, val14) M(v15, val15) \
    M(v16, val16) M(v17, val17) M(v18, val18) M(v19, val19) \
    M(v20, val20) M(v21, val21) M(v22, val22) M(v23, val23) \
    M(v24, val24) M(v25, val25) M(v26, val26) M(v27, val27) \
    M(v28, val28) M(v29, val29) M(v30, val30) M(v31, val31)
#define NS_VALUES_32_63(M) \
    M(v32, val32) M(v33, val33) M(v34, val34) M(v35, val35) \
    M(v36, val36) M(v37, val37) M(v38, val38) M(v39, val39) \
    M(v40, val40) M(v41, val41) M(v42, val42) M(v43, val43) \
    M(v44, val44) M(v45, val45) M(v46, val46) M(v47, val47) \
    M(v48, val48) M(v49, val49) M(v50, val50) M(v51, val51) \
    M(v52, val52) M(v53, val53) M(v54, val54) M(v55, val55) \
    M(v56, val56) M(v57, val57) M(v58, val58) M(v59, val59) \
    M(v60, val60) M(v61, val61) M(v62, val62) M(v63, val63)

#if NETSUM_K == 32
#define NS_VALUES(M) NS_VALUES_0_31(M)
#elif NETSUM_K == 64
#define NS_VALUES(M) NS_VALUES_0_31(M) NS_VALUES_32_63(M)
#else
#error "NETSUM_K must be 32 or 64"
#endif

/* Register index = (slot_base + slot) * 2 + set: two sets per slot. */
#define NS_REG_SIZE (2 * NETSUM_SLOTS)

/* ---- constants shared with workers/protocol.py (a test checks they agree) ---- */
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP = 0x0806;
const bit<8> IPPROTO_UDP = 17;
const bit<16> NETSUM_UDP_PORT = 0x6E73;
const bit<8> MSG_DATA = 1;
const bit<8> MSG_RESULT = 2;
const bit<8> FLAG_RETX = 0x01;
const bit<16> ARP_REQUEST = 1;
const bit<16> ARP_REPLY = 2;
const bit<8> ROLE_ROOT = 0;
const bit<8> ROLE_LEAF = 1;
const bit<32> PKT_INSTANCE_TYPE_REPLICATION = 5;

/* ---- headers ---- */
header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    bit<48> sha;
    bit<32> spa;
    bit<48> tha;
    bit<32> tpa;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

/* Field for field the layout of workers.protocol.HEADER_FIELDS. */
header netsum_t {
    bit<8>  msg_type;
    bit<8>  flags;
    bit<16> job_id;
    bit<1>  set;
    bit<15> slot;
    bit<8>  exp;
    bit<8>  count;
    bit<32> offset;
}

#define NS_VALUE_FIELD(f, r) bit<32> f;
header values_t {
    NS_VALUES(NS_VALUE_FIELD)
}

struct headers_t {
    ethernet_t ethernet;
    arp_t      arp;
    ipv4_t     ipv4;
    udp_t      udp;
    netsum_t   netsum;
    values_t   values;
}

struct metadata_t {
    bit<32> cidx;          /* per-job counter index: job_id, or 0 when out of counter range */
    bit<1>  arp_replied;
    /* from the job table */
    bit<1>  job_ok;
    bit<8>  role;
    bit<16> slot_base;
    bit<16> num_slots;
    bit<8>  num_workers;
    bit<16> mgid;
    bit<9>  up_port;
    bit<48> leaf_mac;
    bit<32> leaf_addr;
    bit<48> up_mac;
    bit<32> up_addr;
    /* from the membership table */
    bit<32> worker_bit;
    /* slot state */
    bit<32> slot_abs;
    bit<32> idx;
    bit<32> bm_before;
    bit<32> bm_other;
    bit<32> owner_tag;     /* (epoch << 16) | job_id: who may use a (slot, set) round */
    bit<32> owner_cur;
    bit<32> owner_oth;
    bit<8>  count;
    bit<8>  exp;
    bit<1>  done;
    bit<32> acc;
    /* drop simulator: drop when rnd < threshold, i.e. with probability threshold / 65536 */
    bit<16> sim_in_threshold;
    bit<16> sim_in_rnd;
    bit<16> sim_out_threshold;
    bit<16> sim_out_rnd;
}

/* ---- parser ---- */
parser NetsumParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP: parse_arp;
            default: accept;
        }
    }
    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        /* Only option-less, unfragmented UDP can carry netsum: anything else is plain IP. */
        transition select(hdr.ipv4.ihl, hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (4w5, 13w0, IPPROTO_UDP): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            NETSUM_UDP_PORT: parse_netsum;
            default: accept;
        }
    }
    state parse_netsum {
        /* A short packet fails here or in parse_values with PacketTooShort; ingress sees the
         * missing header and drops the packet as malformed. */
        packet.extract(hdr.netsum);
        transition parse_values;
    }
    state parse_values {
        packet.extract(hdr.values);
        transition accept;
    }
}

control NetsumVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/* ---- ingress ---- */
control NetsumIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

#define NS_VALUE_REGISTER(f, r) register<bit<32>>(NS_REG_SIZE) r;
    NS_VALUES(NS_VALUE_REGISTER)
    register<bit<32>>(NS_REG_SIZE) bitmap;
    register<bit<32>>(NS_REG_SIZE) owner;
    register<bit<8>>(NS_REG_SIZE) contributions;
    register<bit<8>>(NS_REG_SIZE) max_exp;
    register<bit<1>>(NS_REG_SIZE) done;

    counter(NETSUM_MAX_JOBS, CounterType.packets_and_bytes) pkts_in;
    counter(NETSUM_MAX_JOBS, CounterType.packets) retransmissions;
    counter(NETSUM_MAX_JOBS, CounterType.packets) drop_non_member;
    counter(NETSUM_MAX_JOBS, CounterType.packets) drop_bad_slot;
    counter(NETSUM_MAX_JOBS, CounterType.packets) drop_unknown_job;
    counter(NETSUM_MAX_JOBS, CounterType.packets) drop_bad_type;
    counter(NETSUM_MAX_JOBS, CounterType.packets) drop_malformed;
    counter(512, CounterType.packets) sim_drops_in;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* ---- ordinary traffic ---- */
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action broadcast(bit<16> mgid) {
        standard_metadata.mcast_grp = mgid;
    }
    table dmac {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { forward; broadcast; drop; }
        default_action = broadcast(1);
        size = 4096;
    }

    action arp_reply(bit<48> mac) {
        bit<32> requested = hdr.arp.tpa;
        hdr.arp.oper = ARP_REPLY;
        hdr.arp.tha = hdr.arp.sha;
        hdr.arp.tpa = hdr.arp.spa;
        hdr.arp.sha = mac;
        hdr.arp.spa = requested;
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = mac;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
        meta.arp_replied = 1;
    }
    table arp_responder {
        key = { hdr.arp.tpa: exact; }
        actions = { arp_reply; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    /* ---- drop simulator (loss experiments; this kernel has no netem) ---- */
    action set_drop_in(bit<16> threshold) {
        meta.sim_in_threshold = threshold;
        random(meta.sim_in_rnd, (bit<16>)0, (bit<16>)0xFFFF);
    }
    action no_drop_in() {
        meta.sim_in_threshold = 0;
    }
    table drop_sim_in {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_drop_in; no_drop_in; }
        default_action = no_drop_in();
        size = 512;
    }
    action sim_drop_in() {
        sim_drops_in.count((bit<32>)standard_metadata.ingress_port);
        mark_to_drop(standard_metadata);
    }

    /* ---- jobs and members ---- */
    action job_root(bit<16> slot_base, bit<16> num_slots, bit<8> num_workers, bit<16> mgid) {
        meta.job_ok = 1;
        meta.role = ROLE_ROOT;
        meta.slot_base = slot_base;
        meta.num_slots = num_slots;
        meta.num_workers = num_workers;
        meta.mgid = mgid;
    }
    action job_leaf(bit<16> slot_base, bit<16> num_slots, bit<8> num_workers, bit<16> mgid,
                    bit<9> up_port, bit<48> leaf_mac, bit<32> leaf_addr,
                    bit<48> up_mac, bit<32> up_addr) {
        meta.job_ok = 1;
        meta.role = ROLE_LEAF;
        meta.slot_base = slot_base;
        meta.num_slots = num_slots;
        meta.num_workers = num_workers;
        meta.mgid = mgid;
        meta.up_port = up_port;
        meta.leaf_mac = leaf_mac;
        meta.leaf_addr = leaf_addr;
        meta.up_mac = up_mac;
        meta.up_addr = up_addr;
    }
    action unknown_job() {
        drop_unknown_job.count(meta.cidx);
        mark_to_drop(standard_metadata);
    }
    table job {
        key = { hdr.netsum.job_id: exact; }
        actions = { job_root; job_leaf; unknown_job; }
        default_action = unknown_job();
        size = NETSUM_MAX_JOBS;
    }

    action set_member(bit<32> worker_bit) {
        meta.worker_bit = worker_bit;
    }
    action non_member() {
        meta.worker_bit = 0;
        drop_non_member.count(meta.cidx);
        mark_to_drop(standard_metadata);
    }
    table member {
        key = {
            hdr.netsum.job_id: exact;
            hdr.ipv4.srcAddr: exact;
        }
        actions = { set_member; non_member; }
        default_action = non_member();
        size = 8192;
    }

    /* A job's epoch: the controller bumps it when it (re)installs a job, so that rounds left in
     * the job's slots by an earlier run (or by another job that had the range) count as empty. */
    action set_epoch(bit<16> epoch) {
        meta.owner_tag = ((bit<32>)epoch << 16) | (bit<32>)hdr.netsum.job_id;
    }
    table job_epoch {
        key = { hdr.netsum.job_id: exact; }
        actions = { set_epoch; }
        default_action = set_epoch(0);
        size = NETSUM_MAX_JOBS;
    }

    /* ---- drops by reason (non-member and unknown job are the tables' default actions) ---- */
    action drop_malformed_pkt() {
        drop_malformed.count(meta.cidx);
        mark_to_drop(standard_metadata);
    }
    action drop_bad_slot_pkt() {
        drop_bad_slot.count(meta.cidx);
        mark_to_drop(standard_metadata);
    }
    action drop_bad_type_pkt() {
        drop_bad_type.count(meta.cidx);
        mark_to_drop(standard_metadata);
    }
    action count_in() {
        pkts_in.count(meta.cidx);
    }

    /* ---- aggregation ---- */
    action locate_slot() {
        meta.slot_abs = (bit<32>)meta.slot_base + (bit<32>)hdr.netsum.slot;
        meta.idx = (meta.slot_abs << 1) | (bit<32>)hdr.netsum.set;
    }

    /* SwitchML's bitmap step: set this worker's bit in its set, clear it in the other set (the
     * worker has moved on from the other set's round, so it may start a new round there).
     * A set whose owner is not this job and epoch holds a stale round: its bitmap counts as
     * empty (mask 0), so the packet starts a fresh round instead of replaying an old result.
     * The mask is computed without `if`: (bit<33>)(a ^ b) - 1 has bit 32 set iff a == b. */
    action update_bitmap() {
        owner.read(meta.owner_cur, meta.idx);
        owner.write(meta.idx, meta.owner_tag);
        bit<33> same_cur = (bit<33>)(meta.owner_cur ^ meta.owner_tag) - 1;
        bitmap.read(meta.bm_before, meta.idx);
        meta.bm_before = meta.bm_before & (32w0 - (bit<32>)(same_cur >> 32));
        bitmap.write(meta.idx, meta.bm_before | meta.worker_bit);

        owner.read(meta.owner_oth, meta.idx ^ 1);
        owner.write(meta.idx ^ 1, meta.owner_tag);
        bit<33> same_oth = (bit<33>)(meta.owner_oth ^ meta.owner_tag) - 1;
        bitmap.read(meta.bm_other, meta.idx ^ 1);
        meta.bm_other = meta.bm_other & (32w0 - (bit<32>)(same_oth >> 32));
        bitmap.write(meta.idx ^ 1, meta.bm_other & ~meta.worker_bit);
    }

#define NS_INIT_VALUE(f, r) r.write(meta.idx, hdr.values.f);
    action first_contribution() {
        meta.count = 1;
        contributions.write(meta.idx, 1);
        meta.exp = hdr.netsum.exp;
        max_exp.write(meta.idx, hdr.netsum.exp);
        done.write(meta.idx, 0);
        NS_VALUES(NS_INIT_VALUE)
    }

    /* After this action the header carries the running sums, so the last contribution leaves
     * with the complete aggregate. */
#define NS_ADD_VALUE(f, r) \
        r.read(meta.acc, meta.idx); \
        hdr.values.f = hdr.values.f + meta.acc; \
        r.write(meta.idx, hdr.values.f);
    action add_contribution() {
        contributions.read(meta.count, meta.idx);
        meta.count = meta.count + 1;
        contributions.write(meta.idx, meta.count);
        max_exp.read(meta.exp, meta.idx);
        /* max without `if`: bit 8 of the 9-bit difference old - new is the borrow, set exactly
         * when old < new; it becomes an all-ones mask that selects new. */
        bit<9> diff = (bit<9>)meta.exp - (bit<9>)hdr.netsum.exp;
        bit<8> take_new = (bit<8>)(diff >> 8);
        meta.exp = meta.exp ^ ((meta.exp ^ hdr.netsum.exp) & (8w0 - take_new));
        max_exp.write(meta.idx, meta.exp);
        NS_VALUES(NS_ADD_VALUE)
    }

    action consume() {
        mark_to_drop(standard_metadata);
    }

    /* Root: the last contribution becomes the RESULT, multicast to the job's group.  The source
     * becomes the service address the workers sent to; egress writes each replica's destination. */
    action multicast_result() {
        done.write(meta.idx, 1);
        hdr.netsum.msg_type = MSG_RESULT;
        hdr.netsum.flags = 0;
        hdr.netsum.exp = meta.exp;
        hdr.netsum.count = meta.count;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
        hdr.udp.srcPort = NETSUM_UDP_PORT;
        hdr.udp.checksum = 0;
        standard_metadata.mcast_grp = meta.mgid;
    }

    /* Leaf: the completed local sum goes up as one DATA contribution of the same job. */
    action to_uplink() {
        hdr.netsum.msg_type = MSG_DATA;
        hdr.netsum.exp = meta.exp;
        hdr.netsum.count = 0;
        hdr.ethernet.srcAddr = meta.leaf_mac;
        hdr.ethernet.dstAddr = meta.up_mac;
        hdr.ipv4.srcAddr = meta.leaf_addr;
        hdr.ipv4.dstAddr = meta.up_addr;
        hdr.udp.srcPort = NETSUM_UDP_PORT;
        hdr.udp.dstPort = NETSUM_UDP_PORT;
        hdr.udp.checksum = 0;
        standard_metadata.egress_spec = meta.up_port;
    }
    action send_up() {
        hdr.netsum.flags = 0;
        to_uplink();
    }

    /* Duplicates: read the slot's status (no write, so no atomicity concern). */
    action retransmission() {
        retransmissions.count(meta.cidx);
        contributions.read(meta.count, meta.idx);
        max_exp.read(meta.exp, meta.idx);
        done.read(meta.done, meta.idx);
    }

#define NS_LOAD_VALUE(f, r) r.read(hdr.values.f, meta.idx);
    /* Duplicate for a finished slot: the stored result goes back to the sender only. */
    action reply_result() {
        NS_VALUES(NS_LOAD_VALUE)
        hdr.netsum.msg_type = MSG_RESULT;
        hdr.netsum.flags = 0;
        hdr.netsum.exp = meta.exp;
        hdr.netsum.count = meta.count;
        bit<48> mac = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = mac;
        bit<32> addr = hdr.ipv4.srcAddr;
        hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
        hdr.ipv4.dstAddr = addr;
        bit<16> port = hdr.udp.srcPort;
        hdr.udp.srcPort = hdr.udp.dstPort;
        hdr.udp.dstPort = port;
        hdr.udp.checksum = 0;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    /* Leaf duplicate for a locally complete slot whose final result has not come down yet: the
     * partial aggregate (or the root's answer to it) may have been lost, so send it up again. */
    action resend_up() {
        NS_VALUES(NS_LOAD_VALUE)
        hdr.netsum.flags = FLAG_RETX;
        to_uplink();
    }

#define NS_STORE_VALUE(f, r) r.write(meta.idx, hdr.values.f);
    /* Leaf: the root's RESULT is stored as the slot's final value (so later duplicates get it)
     * and multicast to the leaf's workers from the leaf's service address. */
    action result_down() {
        NS_VALUES(NS_STORE_VALUE)
        max_exp.write(meta.idx, hdr.netsum.exp);
        contributions.write(meta.idx, hdr.netsum.count);
        done.write(meta.idx, 1);
        hdr.netsum.flags = 0;
        hdr.ethernet.srcAddr = meta.leaf_mac;
        hdr.ipv4.srcAddr = meta.leaf_addr;
        hdr.udp.srcPort = NETSUM_UDP_PORT;
        hdr.udp.checksum = 0;
        standard_metadata.mcast_grp = meta.mgid;
    }

    apply {
        if (hdr.arp.isValid()) {
            if (hdr.arp.oper == ARP_REQUEST) {
                arp_responder.apply();
            }
        }
        if (meta.arp_replied == 1) {
            /* arp_reply already turned the request around */
            meta.cidx = 0;
        } else if (hdr.udp.isValid() && hdr.udp.dstPort == NETSUM_UDP_PORT) {
            meta.cidx = 0;
            if (hdr.netsum.isValid()) {
                if (hdr.netsum.job_id < NETSUM_MAX_JOBS) {
                    meta.cidx = (bit<32>)hdr.netsum.job_id;
                }
            }
            drop_sim_in.apply();
            if (meta.sim_in_rnd < meta.sim_in_threshold) {
                sim_drop_in();
            } else if (!hdr.values.isValid()) {
                /* netsum header or values cut short (parser error PacketTooShort) */
                drop_malformed_pkt();
            } else {
                count_in();
                job.apply();
                if (meta.job_ok == 1) {
                    locate_slot();
                    if ((bit<16>)hdr.netsum.slot >= meta.num_slots ||
                            meta.slot_abs >= NETSUM_SLOTS) {
                        drop_bad_slot_pkt();
                    } else if (hdr.netsum.msg_type == MSG_DATA) {
                        member.apply();
                        if (meta.worker_bit != 0) {
                            job_epoch.apply();
                            update_bitmap();
                            if ((meta.bm_before & meta.worker_bit) == 0) {
                                if (meta.bm_before == 0) {
                                    first_contribution();
                                } else {
                                    add_contribution();
                                }
                                if (meta.count != meta.num_workers) {
                                    consume();
                                } else if (meta.role == ROLE_LEAF) {
                                    send_up();
                                } else {
                                    multicast_result();
                                }
                            } else {
                                retransmission();
                                if (meta.done == 1) {
                                    reply_result();
                                } else if (meta.role == ROLE_LEAF &&
                                           meta.count == meta.num_workers) {
                                    resend_up();
                                } else {
                                    consume();
                                }
                            }
                        }
                    } else if (hdr.netsum.msg_type == MSG_RESULT && meta.role == ROLE_LEAF &&
                               standard_metadata.ingress_port == meta.up_port) {
                        result_down();
                    } else {
                        drop_bad_type_pkt();
                    }
                }
            }
        } else {
            dmac.apply();
        }
    }
}

/* ---- egress ---- */
control NetsumEgress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    counter(NETSUM_MAX_JOBS, CounterType.packets_and_bytes) results_out;
    counter(NETSUM_MAX_JOBS, CounterType.packets) partials_up;
    counter(512, CounterType.packets) sim_drops_out;

    /* Per multicast copy: rid identifies (job, worker); the destination of the RESULT. */
    action set_replica(bit<48> dst_mac, bit<32> dst_addr, bit<16> dst_port) {
        hdr.ethernet.dstAddr = dst_mac;
        hdr.ipv4.dstAddr = dst_addr;
        hdr.udp.dstPort = dst_port;
    }
    table replica {
        key = {
            standard_metadata.egress_rid: exact;
            standard_metadata.egress_port: exact;
        }
        actions = { set_replica; NoAction; }
        default_action = NoAction();
        size = 8192;
    }

    action set_drop_out(bit<16> threshold) {
        meta.sim_out_threshold = threshold;
        random(meta.sim_out_rnd, (bit<16>)0, (bit<16>)0xFFFF);
    }
    action no_drop_out() {
        meta.sim_out_threshold = 0;
    }
    table drop_sim_out {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_drop_out; no_drop_out; }
        default_action = no_drop_out();
        size = 512;
    }
    action sim_drop_out() {
        sim_drops_out.count((bit<32>)standard_metadata.egress_port);
        mark_to_drop(standard_metadata);
    }
    action count_result() {
        results_out.count(meta.cidx);
    }
    action count_partial() {
        partials_up.count(meta.cidx);
    }
    action no_reflection() {
        mark_to_drop(standard_metadata);
    }

    apply {
        if (hdr.netsum.isValid()) {
            if (hdr.netsum.msg_type == MSG_RESULT &&
                    standard_metadata.instance_type == PKT_INSTANCE_TYPE_REPLICATION) {
                replica.apply();
            }
            drop_sim_out.apply();
            if (meta.sim_out_rnd < meta.sim_out_threshold) {
                sim_drop_out();
            } else if (hdr.netsum.msg_type == MSG_RESULT) {
                count_result();
            } else {
                count_partial();
            }
        } else if (standard_metadata.instance_type == PKT_INSTANCE_TYPE_REPLICATION &&
                   standard_metadata.egress_port == standard_metadata.ingress_port) {
            /* a flooded frame never goes back out of the port it came in on */
            no_reflection();
        }
    }
}

/* Only netsum packets are rewritten (always option-less IPv4, see the parser). */
control NetsumComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.netsum.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control NetsumDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.netsum);
        packet.emit(hdr.values);
    }
}

V1Switch(NetsumParser(), NetsumVerifyChecksum(), NetsumIngress(), NetsumEgress(),
         NetsumComputeChecksum(), NetsumDeparser()) main;
