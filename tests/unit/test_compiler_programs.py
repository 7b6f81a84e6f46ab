"""netsum's compiler on its own test programs (tests/p4programs): golden JSON/P4Info pinned in
tests/golden/compiler (regenerate with UPDATE_GOLDEN=1), and the compiled JSON run on the
embedded switch with real frames."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from netsum import p4c as compiler
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Exact, Lpm, Replica, TableEntry

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "p4programs"
GOLDEN = ROOT / "tests" / "golden" / "compiler"
NAMES = ["basic_router", "tunnel", "mcast", "stateful", "checksum_hash", "stack", "calc",
         "tutorial_mix", "grab_bag", "subcontrol", "probe", "learning",
         "punt_cache"]
# Every program runs on the embedded switch (stack and tutorial_mix need its push/pop and
# stack_field support); the packet-level tests below drive each one.
RUNNABLE = NAMES


def build(name: str) -> compiler.CompileResult:
    return compiler.compile_file(PROGRAMS / f"{name}.p4")


def test_every_program_is_listed_and_runs_against_hand_written_packets() -> None:
    """Golden files pin the output; what checks it is a packet test per program, with the
    expected frames worked out from the P4 source (device("<name>") below)."""
    assert sorted(NAMES) == sorted(p.stem for p in PROGRAMS.glob("*.p4"))
    text = Path(__file__).read_text()
    assert [n for n in NAMES if f'device("{n}")' not in text] == []


@pytest.mark.parametrize("name", NAMES)
def test_golden(name: str) -> None:
    res = build(name)
    outputs = {f"{name}.json": res.json_text(), f"{name}.p4info.txtpb": res.p4info_text()}
    for fname, text in outputs.items():
        path = GOLDEN / fname
        if os.environ.get("UPDATE_GOLDEN") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        assert path.exists(), f"{path} missing; run with UPDATE_GOLDEN=1 to create it"
        assert text == path.read_text(), f"{fname} changed; UPDATE_GOLDEN=1 if intended"


@pytest.mark.parametrize("name", NAMES)
def test_deterministic(name: str) -> None:
    a, b = build(name), build(name)
    assert a.json_text() == b.json_text() and a.p4info_text() == b.p4info_text()


@pytest.mark.parametrize("name", RUNNABLE)
def test_loadable_by_the_embedded_switch(name: str) -> None:
    Device.build_pipeline(build(name).bmv2_json)


def test_header_stack_lowering() -> None:
    doc = build("stack").bmv2_json
    assert doc["header_stacks"] == [{"name": "labels", "id": 0, "size": 3,
                                     "header_type": "label_t", "header_ids": [3, 4, 5]}]
    state = doc["parsers"][0]["parse_states"][1]
    assert state["parser_ops"][0]["parameters"] == [{"type": "stack", "value": "labels"}]
    assert state["transition_key"] == [{"type": "stack_field", "value": ["labels", "bos"]}]
    ops = {a["name"]: [p["op"] for p in a["primitives"]] for a in doc["actions"]}
    assert ops["StkIngress.pop"] == ["pop", "assign"]
    assert ops["StkIngress.push"][:2] == ["push", "add_header"]


def device(name: str) -> Device:
    d = Device()
    d.install(Device.build_pipeline(build(name).bmv2_json))
    return d


def ip(a: str) -> int:
    return int.from_bytes(bytes(int(x) for x in a.split(".")), "big")


def udp(dst: str = "10.1.2.3", ttl: int = 64, src: str = "10.9.9.9") -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02") /
                 IP(src=src, dst=dst, ttl=ttl) / UDP(sport=5, dport=6) / (b"z" * 20))


def test_router_forwards_by_longest_prefix_and_fixes_checksum() -> None:
    d = device("basic_router")
    t = d.pipeline.tables["MyIngress.ipv4_lpm"]
    t.insert(TableEntry((Lpm(ip("10.1.0.0"), 16),),
                        ActionCall("MyIngress.ipv4_forward", (0xAA, 2))))
    t.insert(TableEntry((Lpm(ip("10.1.2.0"), 24),),
                        ActionCall("MyIngress.ipv4_forward", (0xBB, 3))))
    out = d.process(1, udp("10.1.2.3"))
    assert [p for p, _ in out] == [3]
    f = Ether(out[0][1])
    assert f.dst == "00:00:00:00:00:bb" and f.src == "00:00:00:00:00:01"
    assert f[IP].ttl == 63
    assert f[IP].chksum == IP(bytes(f[IP]))[IP].__class__(bytes(f[IP])).chksum
    recomputed = IP(bytes(Ether(out[0][1])[IP]))
    del recomputed.chksum
    assert IP(bytes(recomputed)).chksum == f[IP].chksum
    assert [p for p, _ in d.process(1, udp("10.1.9.9"))] == [2]
    assert d.process(1, udp("192.168.0.1")) == []  # default action drop()


def test_tunnel_encap_then_decap_at_the_edge() -> None:
    d = device("tunnel")
    d.pipeline.tables["TunnelIngress.ipv4_lpm"].insert(TableEntry(
        (Lpm(ip("10.0.0.0"), 8),), ActionCall("TunnelIngress.encap", (7,))))
    d.pipeline.tables["TunnelIngress.myTunnel_exact"].insert(TableEntry(
        (Exact(7),), ActionCall("TunnelIngress.myTunnel_forward", (4,))))
    out = d.process(1, udp("10.2.3.4"))
    assert [p for p, _ in out] == [4]
    frame = out[0][1]
    assert frame[12:14] == b"\x12\x12" and frame[14:18] == b"\x08\x00\x00\x07"
    # The edge port strips the tunnel header again.
    d.pipeline.tables["TunnelEgress.edge"].insert(TableEntry(
        (Exact(4),), ActionCall("TunnelEgress.decap", ())))
    out = d.process(1, udp("10.2.3.4"))
    assert Ether(out[0][1])[IP].dst == "10.2.3.4"
    assert out[0][1][12:14] == b"\x08\x00"


def test_multicast_replicas_are_rewritten_per_rid() -> None:
    d = device("mcast")
    d.pipeline.pre.mc_group_insert(5, [Replica(2, 1), Replica(3, 2), Replica(1, 3)])
    d.pipeline.tables["McIngress.l2"].insert(TableEntry(
        (Exact(0x000000000001),), ActionCall("McIngress.flood", (5,))))
    d.pipeline.tables["McIngress.port_flood"].insert(TableEntry(
        (Exact(1),), ActionCall("McIngress.flood", (5,))))
    d.pipeline.tables["McEgress.per_replica"].insert(TableEntry(
        (Exact(2), Exact(3)), ActionCall("McEgress.rewrite_dst", (0xCAFE,))))
    out = sorted(d.process(1, udp()))
    assert [p for p, _ in out] == [2, 3]  # the copy back to port 1 is dropped in egress
    assert Ether(out[1][1]).dst == "00:00:00:00:ca:fe"
    assert Ether(out[0][1]).dst == "00:00:00:00:00:01"


def test_register_accumulates_and_saturates_inside_one_action() -> None:
    d = device("stateful")
    payload = (3).to_bytes(4, "big") + bytes(4 + 1 + 1 + 2 + 2 + 1)
    frame = bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02", type=0x88B5)) + payload
    totals = []
    for _ in range(3):
        out = d.process(1, frame)
        body = out[0][1][14:]
        totals.append(int.from_bytes(body[4:8], "big"))
    # accumulate() stored the running total, then arith() rewrote it as ~total << 2.
    assert totals == [(~n << 2) & 0xFFFFFFFF for n in (1, 2, 3)]
    assert d.pipeline.registers["StIngress.totals"].read(3) == 3
    assert d.pipeline.counters["StIngress.per_flow"].read(3).packets == 3
    d.pipeline.registers["StIngress.totals"].write(3, 100)
    out = d.process(1, frame)
    body = out[0][1][14:]
    assert d.pipeline.registers["StIngress.totals"].read(3) == 100
    assert int.from_bytes(body[4:8], "big") == (~100 << 2) & 0xFFFFFFFF  # arith() ran after
    assert body[-1] == 0xFF  # sat = 1 (clamped) |+| 255 saturates instead of wrapping to 0


def test_const_entries_route_and_parser_error_drops() -> None:
    d = device("checksum_hash")
    assert [p for p, _ in d.process(1, udp("10.1.0.9"))] == [2]
    assert [p for p, _ in d.process(1, udp("10.7.0.9"))] == [1]
    bad = bytearray(udp("10.1.0.9"))
    bad[14] = 0x65  # IP version 6: lookahead select rejects, parser_error is set
    assert d.process(1, bytes(bad)) == []


@pytest.mark.parametrize("op,a,b,result", [
    (b"+", 7, 5, 12), (b"-", 5, 7, (5 - 7) & 0xFFFFFFFF), (b"&", 0xF0F0, 0xFF00, 0xF000),
    (b"|", 1, 2, 3), (b"^", 3, 1, 2),
])
def test_calc_tutorial_program(op: bytes, a: int, b: int, result: int) -> None:
    d = device("calc")
    body = b"P4\x01" + op + a.to_bytes(4, "big") + b.to_bytes(4, "big") + bytes(4)
    frame = bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02", type=0x1234)) + body
    out = d.process(3, frame)
    assert [p for p, _ in out] == [3]  # sent back where it came from
    reply = out[0][1]
    assert reply[:6] == bytes.fromhex("000000000002") and reply[6:12] == bytes.fromhex("000000000001")
    assert int.from_bytes(reply[14 + 12:14 + 16], "big") == result
    bad = frame[:14] + b"Q" + frame[15:]  # lookahead sees no 'P': not a calc packet -> dropped
    assert d.process(3, bad) == []


def test_runtime_argument_calls_get_a_table_of_their_own() -> None:
    """compute_hashes(hdr.ipv4.srcAddr, ...) called directly with run-time arguments: as in
    p4c's output (tests/fixtures/p4c/programs/tutorial_mix.json) the call is a keyless table
    tbl_compute_hashes whose const default is the action with every argument bound (no
    action data), so P4Info lists the action as p4c does."""
    doc = build("tutorial_mix").bmv2_json
    act = next(a for a in doc["actions"] if a["name"] == "MixIngress.compute_hashes")
    ops = [p["op"] for p in act["primitives"]]
    # copy-in of its four arguments, each hash's data list materialized into temporaries
    assert ops == ["assign"] * 4 + ["assign"] * 5 + ["modify_field_with_hash_based_offset"] + \
        ["assign"] * 5 + ["modify_field_with_hash_based_offset"]
    assert act["runtime_data"] == []
    (tbl,) = [t for p in doc["pipelines"] for t in p["tables"]
              if t["name"] == "tbl_compute_hashes"]
    assert tbl["actions"] == ["MixIngress.compute_hashes"] and tbl["key"] == []
    assert tbl["default_entry"] == {"action_id": act["id"], "action_const": True,
                                    "action_data": [], "action_entry_const": True}
    # the calculations in the order of the actions using them, as in p4c's JSON
    assert [c["algo"] for c in doc["calculations"]] == ["crc16", "crc32", "crc16"]


def test_control_local_initializer_runs_first() -> None:
    doc = build("grab_bag").bmv2_json
    ingress = doc["pipelines"][0]
    first = next(t for t in ingress["tables"] if t["name"] == ingress["init_table"])
    act = doc["actions"][first["action_ids"][0]]
    assert act["primitives"] == [{"op": "assign", "parameters": [
        {"type": "field", "value": ["scalars", "c_0"]}, {"type": "hexstr", "value": "0x0"}]}]
    assert first["next_tables"] == {act["name"]: "I.keyless"}


def test_grab_bag_on_the_switch() -> None:
    d = device("grab_bag")
    # a=9 (not in 0..3, not 4..7): default accept; noact misses -> c = GREEN; meta.p is LOW so
    # opt is skipped; s = -(-3) = 3 is not negative -> exit before meta.m |-| 1.
    frame = bytes([9, 1, 0xFD]) + bytes(20)
    out = d.process(1, frame)
    assert out and out[0][1][2] == 3


def test_control_instances_are_inlined_with_prefixed_names() -> None:
    d = device("subcontrol")
    src = d.pipeline.tables["SubIngress.src_acl.rules"]
    dst = d.pipeline.tables["SubIngress.dst_acl.rules"]
    src.insert(TableEntry((Exact(0xBAD),), ActionCall("SubIngress.src_acl.deny", ())))
    dst.insert(TableEntry((Exact(0x1),), ActionCall("SubIngress.dst_acl.allow", ())))

    def frame(dst_mac: int, src_mac: int) -> bytes:
        return dst_mac.to_bytes(6, "big") + src_mac.to_bytes(6, "big") + b"\x08\x00" + bytes(30)

    assert d.process(1, frame(0x1, 0xBAD)) == []               # src ACL hit: deny
    assert [p for p, _ in d.process(1, frame(0x1, 0x2))] == [2]  # dst ACL hit: allow
    assert d.pipeline.counters["SubIngress.src_acl.tally.seen"].read(1).packets == 1
    assert d.pipeline.counters["SubIngress.dst_acl.tally.seen"].read(1).packets == 1
    info = build("subcontrol").p4info
    assert [t.preamble.name for t in info.tables] == ["SubIngress.src_acl.rules",
                                                      "SubIngress.dst_acl.rules"]
    assert [t.preamble.alias for t in info.tables] == ["src_acl.rules", "dst_acl.rules"]


def test_table_apply_inside_a_larger_condition() -> None:
    """`!t.apply().hit && x`: the table is applied first and its outcome kept in a bool
    temporary (as p4c does); on the right of && it would not be short-circuited: an error."""
    src = (PROGRAMS / "basic_router.p4").read_text()
    old = "        if (hdr.ipv4.isValid()) {\n            ipv4_lpm.apply();\n        }"
    assert old in src
    src = src.replace(old, "        if (!ipv4_lpm.apply().hit && hdr.ipv4.ttl > 1) {\n"
                           "            standard_metadata.egress_spec = 9;\n        }")
    res = compiler.compile_source(src, "r.p4")
    ingress = res.bmv2_json["pipelines"][0]
    assert ingress["init_table"] == "MyIngress.ipv4_lpm"
    assert set(ingress["tables"][0]["next_tables"]) == {"__HIT__", "__MISS__"}
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    assert [p for p, _ in d.process(1, udp("10.0.0.1"))] == [9]   # miss, ttl 64 > 1
    assert d.process(1, udp("10.0.0.1", ttl=1)) == []              # miss, drop() stays
    d.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        (Lpm(ip("10.0.0.0"), 8),), ActionCall("MyIngress.ipv4_forward", (0xAA, 3))))
    assert [p for p, _ in d.process(1, udp("10.0.0.1"))] == [3]   # hit


def test_switch_on_a_value_becomes_conditionals() -> None:
    src = (PROGRAMS / "basic_router.p4").read_text()
    old = "        if (hdr.ipv4.isValid()) {\n            ipv4_lpm.apply();\n        }"
    src = src.replace(old, "        switch (hdr.ipv4.protocol) {\n"
                           "            6:\n            17: { ipv4_lpm.apply(); }\n"
                           "            1: { standard_metadata.egress_spec = 5; }\n"
                           "            default: { mark_to_drop(standard_metadata); }\n"
                           "        }")
    res = compiler.compile_source(src, "r.p4")
    conds = res.bmv2_json["pipelines"][0]["conditionals"]
    assert [c["expression"]["value"]["op"] for c in conds] == ["or", "=="]
    d = Device()
    d.install(Device.build_pipeline(res.bmv2_json))
    d.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        (Lpm(ip("10.0.0.0"), 8),), ActionCall("MyIngress.ipv4_forward", (0xAA, 3))))
    assert [p for p, _ in d.process(1, udp("10.0.0.1"))] == [3]         # UDP (17)
    icmp = bytes(Ether() / IP(dst="10.0.0.1", proto=1) / (b"x" * 20))
    assert [p for p, _ in d.process(1, icmp)] == [5]                     # 1
    other = bytes(Ether() / IP(dst="10.0.0.1", proto=99) / (b"x" * 20))
    assert d.process(1, other) == []                                     # default


def label(value: int, bos: int, ttl: int = 64, tc: int = 0) -> bytes:
    """One MPLS-style label_t of stack.p4: label:20 tc:3 bos:1 ttl:8."""
    return ((value << 12) | (tc << 9) | (bos << 8) | ttl).to_bytes(4, "big")


def mpls(*labels: bytes) -> bytes:
    return bytes.fromhex("000000000001" "000000000002" "8847") + b"".join(labels) + b"payload!"


def test_stack_pops_and_pushes_labels() -> None:
    d = device("stack")
    lfib = d.pipeline.tables["StkIngress.lfib"]
    lfib.insert(TableEntry((Exact(100),), ActionCall("StkIngress.pop", (2,))))
    lfib.insert(TableEntry((Exact(200),), ActionCall("StkIngress.push", (300, 3))))
    # pop: the top label goes, the rest of the stack and the payload follow unchanged.
    [(port, out)] = d.process(1, mpls(label(100, 0), label(7, 1, ttl=9)))
    assert port == 2 and out == mpls(label(7, 1, ttl=9))
    # push: a new top label (bos 0, ttl 64) in front of the parsed one.
    [(port, out)] = d.process(1, mpls(label(200, 1, ttl=5)))
    assert port == 3 and out == mpls(label(300, 0), label(200, 1, ttl=5))
    # three labels fill the stack; the bottom one (bos) ends parsing.
    three = mpls(label(100, 0), label(8, 0), label(9, 1))
    [(port, out)] = d.process(1, three)
    assert port == 2 and out == mpls(label(8, 0), label(9, 1))
    # not an MPLS frame: no label is valid, lfib is not applied, the frame goes out as is.
    plain = bytes.fromhex("000000000001" "000000000002" "0800") + bytes(20)
    assert [o for _, o in d.process(1, plain)] == [plain]


def route(bos: int, port: int) -> bytes:
    return ((bos << 15) | port).to_bytes(2, "big")


def test_tutorial_mix_source_routing_pops_one_hop_per_switch() -> None:
    d = device("tutorial_mix")
    inner = bytes(IP(dst="10.0.0.1") / UDP() / (b"x" * 8))
    eth = bytes.fromhex("000000000001" "000000000002" "1234")
    [(port, out)] = d.process(1, eth + route(0, 2) + route(0, 5) + route(1, 3) + inner)
    assert port == 2 and out == eth + route(0, 5) + route(1, 3) + inner
    [(port, out)] = d.process(1, out)
    assert port == 5 and out == eth + route(1, 3) + inner
    [(port, out)] = d.process(1, out)
    assert port == 3 and out == eth + inner


def tcp(sport: int, dst: str = "10.0.0.1") -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02") /
                 IP(src="10.9.9.9", dst=dst) / TCP(sport=sport, dport=80))


def test_tutorial_mix_ecmp_spreads_flows_and_marks_the_bloom_filter() -> None:
    d = device("tutorial_mix")
    group = d.pipeline.tables["MixIngress.ecmp_group"]
    nhop = d.pipeline.tables["MixIngress.ecmp_nhop"]
    group.insert(TableEntry((Lpm(ip("10.0.0.0"), 8),),
                            ActionCall("MixIngress.set_ecmp_select", (4, 2))))
    group.insert(TableEntry((Lpm(ip("10.7.0.0"), 16),),
                            ActionCall("MixIngress.set_ecmp_select", (9, 1))))
    for sel, port in ((4, 5), (5, 6), (9, 7)):
        nhop.insert(TableEntry((Exact(sel),), ActionCall("MixIngress.set_nhop", (port,))))
    ports = {sport: [p for p, _ in d.process(1, tcp(sport))] for sport in range(1000, 1032)}
    assert all(len(p) == 1 and p[0] in (5, 6) for p in ports.values())
    assert {p[0] for p in ports.values()} == {5, 6}                  # both members used
    assert [p for p, _ in d.process(1, tcp(1000))] == ports[1000]    # a flow sticks
    assert [p for p, _ in d.process(1, tcp(1000, "10.7.1.1"))] == [7]  # base 9, count 1
    assert d.process(1, tcp(1000, "192.168.1.1")) == []               # default drop()

    def ones(name: str) -> int:
        reg = d.pipeline.registers[name]
        return sum(reg.read(i) for i in range(4096))

    # 32 + 2 distinct flows marked (a collision could only lower the count); UDP marks none.
    marked = ones("MixIngress.bloom_1"), ones("MixIngress.bloom_2")
    assert all(0 < n <= 34 for n in marked)
    d.process(1, udp("10.0.0.1"))
    assert (ones("MixIngress.bloom_1"), ones("MixIngress.bloom_2")) == marked


def test_probe_keeps_locals_across_the_table_and_copies_parameters() -> None:
    d = device("probe")
    d.pipeline.tables["ProbeIngress.fwd"].insert(TableEntry(
        (Exact(1),), ActionCall("ProbeIngress.set_port", (3,))))
    probe = bytes([4]) + bytes(6) + bytes(6) + b"\x00\x00" + bytes([10, 0])
    frame = bytes.fromhex("000000000001" "000000000002" "0812") + probe + b"tail"
    (port, out), = d.process(1, frame)
    assert port == 3
    hops, in_ts, out_ts = out[14], int.from_bytes(out[15:21], "big"), \
        int.from_bytes(out[21:27], "big")
    assert hops == 5                        # bump() copied the incremented value out
    assert in_ts > 0 and out_ts >= in_ts    # the local kept the ingress time across fwd
    assert out[27:29] == b"\x08\x12"        # saved = etype, read after the table
    assert out[29] == 10 + 5 + 5            # add_twice: acc + v + v with v = hops (5)
    assert out[30] == 3                     # egress_spec after the table: port 3
    assert out[31:] == b"tail"
    # Not a probe: forwarded by the default action, untouched.
    plain = bytes.fromhex("000000000001" "000000000002" "0800") + b"x" * 20
    assert d.process(2, plain) == [(2, plain)]


def test_learning_digests_unknown_sources_and_ages_smac_entries() -> None:
    d = device("learning")
    digests: list[tuple[int, tuple[int, ...]]] = []
    d.digest_handler = lambda lid, values: digests.append((lid, values))
    a, b = 0x0200000000AA, 0x0200000000BB
    f_ab = b.to_bytes(6, "big") + a.to_bytes(6, "big") + b"\x88\xb5" + b"x" * 20
    # Unknown source: smac's const default `learn` digests {src, ingress port}; dmac's
    # default discards.
    assert d.process(3, f_ab) == []
    assert digests == [(1, (a, 3))]
    # Known source (smac `known`) and destination (dmac forward(2)): no digest, unicast.
    smac = d.pipeline.tables["Ing.smac"]
    now = [1_000]
    smac._clock = lambda: now[0]      # ageing on a hand-driven clock
    smac.insert(TableEntry((Exact(a),), ActionCall("Ing.known")))
    smac.set_ttl((Exact(a),), 0, 500)
    d.pipeline.tables["Ing.dmac"].insert(TableEntry((Exact(b),), ActionCall("Ing.forward",
                                                                            (2,))))
    assert d.process(3, f_ab) == [(2, f_ab)] and len(digests) == 1
    # Ageing: the hit above counts from the sweep that sees it (t=1100); idle from then on,
    # the entry is reported once its TTL (500) has passed without a hit, and only once.
    now[0] = 1_100
    assert smac.sweep() == []
    now[0] = 1_599
    assert smac.sweep() == []
    now[0] = 1_600
    assert [e.key for e in smac.sweep()] == [(Exact(a),)]
    now[0] = 5_000
    assert smac.sweep() == []
    # A hit re-arms it: reported again a full TTL after the sweep that saw the hit.
    d.process(3, f_ab)
    assert smac.sweep() == [] and smac.elapsed_ns((Exact(a),)) == 0
    now[0] = 5_499
    assert smac.sweep() == []
    now[0] = 5_500
    assert len(smac.sweep()) == 1
    # An entry without a TTL never ages.
    smac.set_ttl((Exact(a),), 0, 0)
    now[0] = 10 ** 12
    assert smac.sweep() == []


def test_punt_cache_punts_unknown_flows_and_forwards_cached_ones() -> None:
    d = device("punt_cache")
    eth = bytes.fromhex("0000000000aa" "0000000000bb" "0800")
    ip = bytes([0x45, 0, 0, 40, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2])
    frame = eth + ip + b"p" * 20
    # Miss: to CPU port 64 behind packet_in {ingress_port 3 (9 bits), pad 0 (7 bits)}.
    assert d.process(3, frame) == [(64, (3 << 7).to_bytes(2, "big") + frame)]
    d.pipeline.tables["Ing.flow_cache"].insert(TableEntry(
        (Exact(17), Exact(0x0A000101), Exact(0x0A000202)),
        ActionCall("Ing.cached", (2, 1, 0x080000000222))))
    out = bytes.fromhex("080000000222") + frame[6:22] + bytes([63]) + frame[23:]
    assert d.process(3, frame) == [(2, out)]
    # From the CPU: packet_out {egress_port 5} is removed and names the port.
    assert d.process(64, (5 << 7).to_bytes(2, "big") + frame) == [(5, frame)]
    # Not IPv4: dropped.
    assert d.process(3, eth[:12] + b"\x86\xdd" + b"z" * 40) == []
