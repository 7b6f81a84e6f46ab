"""netsum-p4c's outputs on the embedded switch: every golden JSON loads, and the header-stack
programs (tests/p4programs/stack.p4, tutorial_mix.p4) behave as their P4 source says, frame in,
frames out — MPLS-style labels parsed to bottom-of-stack through `stack_field` transition keys,
popped and pushed; source routing that pops a hop; a bloom filter and ECMP hashed with the
v1model algorithms."""
from __future__ import annotations

import json
import logging
import zlib
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest
from scapy.contrib.mpls import MPLS
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Exact, Lpm, TableEntry
from netsum.switch.errors import ConfigError
from netsum.switch.pipeline import Pipeline
from netsum.switch.primitives import log_format

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
ALL_JSON = sorted((GOLDEN / "compiler").glob("*.json")) + sorted((GOLDEN / "p4").glob("*.json"))
PAYLOAD = b"payload-bytes-0123456789"


def load(name: str, fuse: bool = True) -> Device:
    d = Device()
    d.install(Pipeline(json.loads((GOLDEN / "compiler" / f"{name}.json").read_text()), fuse=fuse))
    return d


def test_golden_set_is_complete() -> None:
    names = {p.stem for p in ALL_JSON}
    assert {"stack", "tutorial_mix", "grab_bag", "netsum_k32"} <= names and len(names) >= 12


@pytest.mark.parametrize("path", ALL_JSON, ids=lambda p: f"{p.parent.name}/{p.stem}")
@pytest.mark.parametrize("fuse", [True, False])
def test_every_golden_json_loads_and_runs(path: Path, fuse: bool) -> None:
    dev = Device()
    dev.install(Pipeline(json.loads(path.read_text()), fuse=fuse))
    # an arbitrary frame goes through the whole life cycle without an internal error
    frame = bytes(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02") /
                  IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=2) / PAYLOAD)
    dev.process(1, frame)
    dev.process(1, b"\x00" * 3)
    assert dev.stats.as_dict().get("internal_errors", 0) == 0


# ---------------------------------------------------------------- stack.p4 (MPLS labels)

ETH = Ether(dst="02:00:00:00:00:0a", src="02:00:00:00:00:0b", type=0x8847)


def labels(*specs: tuple[int, int]) -> bytes:
    """(label, bos) pairs -> the label stack's bytes (tc 0, ttl 9)."""
    return b"".join(bytes(MPLS(label=lab, cos=0, s=bos, ttl=9)) for lab, bos in specs)


def mpls(*specs: tuple[int, int]) -> bytes:
    return bytes(ETH) + labels(*specs) + PAYLOAD


@pytest.fixture(params=[True, False], ids=["fused", "reference"])
def stk(request: pytest.FixtureRequest) -> Device:
    d = load("stack", fuse=request.param)
    t = d.pipeline.tables["StkIngress.lfib"]
    t.insert(TableEntry((Exact(100),), ActionCall("StkIngress.pop", (3,))))
    t.insert(TableEntry((Exact(200),), ActionCall("StkIngress.push", (777, 4))))
    return d


@pytest.mark.parametrize("frame, port, out", [
    # pop: the top label goes, the rest of the stack and the payload follow unchanged
    (mpls((100, 0), (55, 1)), 3, mpls((55, 1))),
    (mpls((100, 0), (56, 0), (57, 1)), 3, mpls((56, 0), (57, 1))),
    # popping the only label leaves an empty stack
    (mpls((100, 1)), 3, mpls()),
    # bos on the first label stops the parser: the second "label" is payload, kept as is
    (mpls((100, 1), (66, 1)), 3, bytes(ETH) + labels((66, 1)) + PAYLOAD),
    # push: a new top label (ttl 64, bos 0), the old ones shifted down
    (mpls((200, 1)), 4, bytes(ETH) + bytes(MPLS(label=777, s=0, ttl=64)) + labels((200, 1))
     + PAYLOAD),
    # push onto a full stack (3 parsed labels): the bottom one falls off
    (mpls((200, 0), (5, 0), (6, 1)), 4,
     bytes(ETH) + bytes(MPLS(label=777, s=0, ttl=64)) + labels((200, 0), (5, 0)) + PAYLOAD),
    # more labels than the stack holds: parser error StackOutOfBounds, the packet goes on
    # with three labels parsed; the fourth is unparsed payload, emitted after them
    (mpls((100, 0), (2, 0), (3, 0), (4, 1)), 3, mpls((2, 0), (3, 0), (4, 1))),
    # unknown label: NoAction, egress_spec stays 0, frame unchanged
    (mpls((999, 1)), 0, mpls((999, 1))),
])
def test_stack_labels(stk: Device, frame: bytes, port: int, out: bytes) -> None:
    assert stk.process(1, frame) == [(port, out)]


def test_stack_out_of_bounds_sets_parser_error(stk: Device) -> None:
    stk.process(1, mpls((100, 0), (2, 0), (3, 0), (4, 1)))
    stk.process(1, mpls((100, 0), (2, 1)))
    assert stk.stats.as_dict()["parser_errors"] == 1


def test_stack_non_mpls_frame_is_untouched(stk: Device) -> None:
    f = bytes(Ether(type=0x0800) / IP(dst="10.0.0.1") / PAYLOAD)
    assert stk.process(2, f) == [(0, f)]


# ------------------------------------------------- tutorial_mix.p4 (source routing, hashes)

def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC, v1model's HashAlgorithm.crc16 (reflected poly 0x8005, init 0)."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def hops(*specs: tuple[int, int]) -> bytes:
    """(bos, port) pairs -> srcRoute_t bytes (bit<1> bos, bit<15> port)."""
    return b"".join(((bos << 15) | port).to_bytes(2, "big") for bos, port in specs)


IP_TCP = bytes(IP(src="10.0.1.1", dst="10.0.2.2", proto=6) / TCP(sport=1234, dport=80,
                                                                  flags="S") / PAYLOAD)
SR_ETH = bytes(Ether(dst="02:00:00:00:00:0a", src="02:00:00:00:00:0b", type=0x1234))


@pytest.fixture(params=[True, False], ids=["fused", "reference"])
def mix(request: pytest.FixtureRequest) -> Device:
    return load("tutorial_mix", fuse=request.param)


@pytest.mark.parametrize("route, port, rest", [
    ([(0, 2), (0, 3), (1, 5)], 2, [(0, 3), (1, 5)]),
    ([(1, 7)], 7, []),
    ([(0, 0x1fe), (1, 1)], 0x1fe, [(1, 1)]),
    ([(0, 0x7ffe), (1, 1)], 0x1fe, [(1, 1)]),     # (bit<9>) cast keeps the low 9 bits
    ([(0, 0x1ff), (1, 1)], None, []),             # 511 is simple_switch's drop port
    # 5 hops, no bos within 4: StackOutOfBounds; 4 parsed hops, the 5th is payload
    ([(0, 1), (0, 2), (0, 3), (0, 4), (1, 6)], 1, [(0, 2), (0, 3), (0, 4), (1, 6)]),
])
def test_source_routing_pops_a_hop(mix: Device, route: list[tuple[int, int]],
                                   port: int | None, rest: list[tuple[int, int]]) -> None:
    out = mix.process(1, SR_ETH + hops(*route) + IP_TCP)
    assert out == ([] if port is None else [(port, SR_ETH + hops(*rest) + IP_TCP)])


def _ecmp(dev: Device, base: int, count: int, ports: dict[int, int]) -> None:
    pl = dev.pipeline
    pl.tables["MixIngress.ecmp_group"].insert(TableEntry(
        (Lpm(0x0A000200, 24),), ActionCall("MixIngress.set_ecmp_select", (base, count))))
    for sel, port in ports.items():
        pl.tables["MixIngress.ecmp_nhop"].insert(TableEntry(
            (Exact(sel),), ActionCall("MixIngress.set_nhop", (port,))))


def test_ecmp_hash_selects_next_hop(mix: Device) -> None:
    eth = bytes(Ether(dst="02:00:00:00:00:0a", src="02:00:00:00:00:0b", type=0x0800))
    _ecmp(mix, 100, 8, {100 + k: 10 + k for k in range(8)})
    key = bytes([10, 0, 1, 1, 10, 0, 2, 2, 6]) + (1234).to_bytes(2, "big") + \
        (80).to_bytes(2, "big")            # srcAddr, dstAddr, protocol, srcPort, dstPort
    expect = 10 + crc16_arc(key) % 8
    assert mix.process(1, eth + IP_TCP) == [(expect, eth + IP_TCP)]
    # no route: ecmp_group's default drop()
    other = bytes(IP(src="10.0.1.1", dst="10.9.9.9", proto=6) / TCP() / PAYLOAD)
    assert mix.process(1, eth + other) == []


def test_bloom_filter_marks_flow(mix: Device) -> None:
    eth = bytes(Ether(dst="02:00:00:00:00:0a", src="02:00:00:00:00:0b", type=0x0800))
    _ecmp(mix, 0, 1, {0: 3})
    regs = mix.pipeline.registers
    flow = bytes([10, 0, 1, 1, 10, 0, 2, 2]) + (1234).to_bytes(2, "big") + \
        (80).to_bytes(2, "big") + bytes([6])   # ipAddr1, ipAddr2, port1, port2, protocol
    for _ in range(2):                       # a second packet of the flow changes nothing
        assert mix.process(1, eth + IP_TCP) == [(3, eth + IP_TCP)]
        b1, b2 = regs["MixIngress.bloom_1"].values, regs["MixIngress.bloom_2"].values
        assert [i for i, v in enumerate(b1) if v] == [crc16_arc(flow) % 4096]
        assert [i for i, v in enumerate(b2) if v] == [zlib.crc32(flow) % 4096]
    # UDP is not hashed into the filter
    udp = bytes(IP(src="10.0.1.9", dst="10.0.2.2") / UDP(sport=9, dport=9) / PAYLOAD)
    assert mix.process(1, eth + udp) == [(3, eth + udp)]
    assert sum(regs["MixIngress.bloom_1"].values) == 1


# ------------------------- what else netsum-p4c emits: stack_field in `set`, lookahead at an
# offset, saturating casts, a bool action parameter, optional const entries, digest, log_msg

FEATURES_P4 = r"""
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
header hop_t { bit<7> tag; bit<1> bos; bit<8> val; }
header nums_t { bit<8> a; bit<8> b; int<8> c; int<8> d; bit<8> op; bit<8> out1; int<8> out2;
                bit<8> flag; }
struct learn_t { bit<48> src; bit<9> port; }
struct metadata { bit<8> lastval; bit<16> peek; bit<8> nhops; }
struct headers { eth_t eth; hop_t[3] hops; nums_t nums; }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) { 0x88b5: parse_hop; 0x88b6: parse_nums; default: accept; }
    }
    state parse_hop {
        pkt.extract(hdr.hops.next);
        meta.lastval = hdr.hops.last.val;
        meta.nhops = meta.nhops + 1;
        transition select(hdr.hops.last.bos) { 1: check_peek; default: parse_hop; }
    }
    state check_peek {
        meta.peek = pkt.lookahead<bit<16>>();
        transition select(pkt.lookahead<nums_t>().b) { 0xee: parse_nums; default: accept; }
    }
    state parse_nums { pkt.extract(hdr.nums); transition accept; }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action arith(bool neg) {
        hdr.nums.out1 = hdr.nums.a |+| hdr.nums.b;
        if (neg) { hdr.nums.out2 = hdr.nums.c |-| hdr.nums.d; }
        else { hdr.nums.out2 = hdr.nums.c |+| hdr.nums.d; }
        sm.egress_spec = 2;
    }
    action learn() {
        digest<learn_t>(1, { hdr.eth.src, sm.ingress_port });
        log_msg("learned src={} port={}", { hdr.eth.src, sm.ingress_port });
        sm.egress_spec = 3;
    }
    action to(bit<9> port) { sm.egress_spec = port; }
    table ops {
        key = { hdr.nums.op: exact; }
        actions = { arith; NoAction; }
        default_action = NoAction();
    }
    table pick {
        key = { hdr.nums.flag: optional; hdr.eth.dst: exact; }
        actions = { to; learn; NoAction; }
        const entries = {
            (1, 0x000000000001): to(5);
            (_, 0x000000000001): to(6);
            (_, 0x000000000002): learn();
        }
        default_action = NoAction();
    }
    apply {
        if (hdr.nums.isValid()) { ops.apply(); }
        pick.apply();
        if (hdr.hops[0].isValid()) {
            hdr.eth.src = (bit<16>)meta.lastval ++ meta.peek ++ (bit<16>)meta.nhops;
            sm.egress_spec = 7;
        }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.hops); pkt.emit(hdr.nums); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


@pytest.fixture(scope="module")
def features_json() -> dict[str, Any]:
    from netsum import p4c as compiler
    return compiler.compile_source(FEATURES_P4).bmv2_json


@pytest.fixture(params=[True, False], ids=["fused", "reference"])
def feat(request: pytest.FixtureRequest, features_json: dict[str, Any]) -> Device:
    d = Device()
    d.install(Pipeline(json.loads(json.dumps(features_json)), fuse=request.param))
    return d


def feth(dst: int, etype: int, src: int = 0x0B) -> bytes:
    return dst.to_bytes(6, "big") + src.to_bytes(6, "big") + etype.to_bytes(2, "big")


def hop(val: int, bos: int, tag: int = 5) -> bytes:
    return bytes([(tag << 1) | bos, val])


@pytest.mark.parametrize("hop_bytes, rest, lastval, nhops", [
    (hop(11, 0) + hop(22, 1), b"\x12\x34" + bytes(20), 22, 2),
    (hop(33, 1), b"\xab\xcd" + bytes(20), 33, 1),
    # no bottom of stack within 3 hops: StackOutOfBounds after 3 extracts; what the parser
    # stored so far (last = third hop) stays, and ingress still runs
    (hop(1, 0) + hop(2, 0) + hop(3, 0), hop(4, 1) + bytes(20), 3, 3),
])
def test_stack_last_and_lookahead_in_parser(feat: Device, hop_bytes: bytes, rest: bytes,
                                            lastval: int, nhops: int) -> None:
    [(port, out)] = feat.process(1, feth(0x0A, 0x88B5) + hop_bytes + rest)
    peek = int.from_bytes(rest[:2], "big") if nhops < 3 else 0
    src = (lastval << 32) | (peek << 16) | nhops
    assert port == 7
    assert out == feth(0x0A, 0x88B5, src) + hop_bytes + rest


def test_lookahead_at_offset_selects_next_state(feat: Device) -> None:
    # the byte 1 bit-octet into the lookahead window is 0xee: nums is parsed (and then ops's
    # arith runs), so out1 = a |+| b gets written into the frame
    feat.pipeline.tables["I.ops"].insert(TableEntry((Exact(1),), ActionCall("I.arith", (0,))))
    nums = bytes([200, 0xEE, 0, 0, 1, 0, 0, 0])
    [(port, out)] = feat.process(1, feth(0x0A, 0x88B5) + hop(9, 1) + nums)
    assert port == 7 and out[16:] == bytes([200, 0xEE, 0, 0, 1, 255, 0, 0])
    nums = bytes([200, 0xED, 0, 0, 1, 0, 0, 0])          # not 0xee: left unparsed
    [(port, out)] = feat.process(1, feth(0x0A, 0x88B5) + hop(9, 1) + nums)
    assert port == 7 and out[16:] == nums


def i8(v: int) -> int:
    return v & 0xFF


@pytest.mark.parametrize("a, b, c, d, neg, out1, out2", [
    (200, 100, -100, 100, 1, 255, -128),      # both saturate
    (1, 2, 100, 100, 0, 3, 127),
    (1, 2, 100, -100, 1, 3, 127),
    (0, 0, -100, -100, 0, 0, -128),
    (10, 20, -5, 7, 1, 30, -12),              # in range: plain arithmetic
    (10, 20, -5, 7, 0, 30, 2),
])
def test_saturating_casts_and_bool_parameter(feat: Device, a: int, b: int, c: int, d: int,
                                             neg: int, out1: int, out2: int) -> None:
    feat.pipeline.tables["I.ops"].insert(TableEntry((Exact(7),), ActionCall("I.arith", (neg,))))
    frame = feth(0x0A, 0x88B6) + bytes([a, b, i8(c), i8(d), 7, 0, 0, 0])
    assert feat.process(1, frame) == [
        (2, feth(0x0A, 0x88B6) + bytes([a, b, i8(c), i8(d), 7, out1, i8(out2), 0]))]


@pytest.mark.parametrize("dst, flag, port", [
    (1, 1, 5),        # first const entry (flag 1) wins over the wildcard one
    (1, 0, 6),        # optional wildcard
    (1, 9, 6),
    (3, 1, 0),        # miss: NoAction
])
def test_optional_const_entries(feat: Device, dst: int, flag: int, port: int) -> None:
    frame = feth(dst, 0x88B6) + bytes([0, 0, 0, 0, 0, 0, 0, flag])
    assert feat.process(1, frame) == [(port, frame)]


def test_digest_and_log_msg(feat: Device, caplog: pytest.LogCaptureFixture) -> None:
    got: list[tuple[int, tuple[int, ...]]] = []
    feat.digest_handler = lambda lid, values: got.append((lid, values))
    log = logging.getLogger("netsum.test.switch.features")
    log.setLevel(logging.INFO)
    feat.set_logger(log)
    frame = feth(2, 0x0800, src=0x0203040506AB)
    with caplog.at_level(logging.INFO, logger=log.name):
        assert feat.process(4, frame) == [(3, frame)]
        assert feat.process(4, feth(1, 0x0800)) == [(6, feth(1, 0x0800))]    # no digest
    assert got == [(1, (0x0203040506AB, 4))]
    assert feat.stats.as_dict()["digests"] == 1
    assert f"learned src={0x0203040506AB} port=4" in caplog.text


def test_digest_handler_failure_keeps_the_packet(feat: Device) -> None:
    def boom(lid: int, values: tuple[int, ...]) -> None:
        raise RuntimeError("consumer bug")
    feat.digest_handler = boom
    frame = feth(2, 0x0800)
    assert feat.process(4, frame) == [(3, frame)]
    assert feat.stats.as_dict()["internal_errors"] == 1


@pytest.mark.parametrize("msg, nargs, fmt", [
    ("x={} y={}", 2, "x={} y={}"),
    ("{}", 1, "{}"),
    ("v={value}!", 1, "v={}!"),               # anything between braces is a placeholder
    (r"set \{a\} = {}", 1, "set {{a}} = {}"),  # escaped braces print as braces
    ("close } alone", 0, "close }} alone"),
    ("plain", 0, "plain"),
])
def test_log_format_follows_bmv2(msg: str, nargs: int, fmt: str) -> None:
    assert log_format(msg, nargs, "p") == fmt
    fmt.format(*range(nargs))                 # usable by str.format as is


def _mutated(doc: dict[str, Any], where: str, edit: Callable[[dict[str, Any]], None]) -> None:
    j = json.loads(json.dumps(doc))
    edit(j)
    with pytest.raises(ConfigError, match=where):
        Device.build_pipeline(j)


def _action(j: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in j["actions"] if a["name"] == name)


def _state(j: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in j["parsers"][0]["parse_states"] if s["name"] == name)


@pytest.mark.parametrize("where, edit", [
    (r"parse_states\[1\] \('parse_hop'\).transition_key\[0\]: unknown header stack 'nope'",
     lambda j: _state(j, "parse_hop")["transition_key"][0].update(value=["nope", "bos"])),
    (r"transition_key\[0\]: header 'hops\[0\]' has no field 'zz'",
     lambda j: _state(j, "parse_hop")["transition_key"][0].update(value=["hops", "zz"])),
    (r"parser_ops\[1\] \('set'\): bad stack_field reference 'hops'",
     lambda j: _state(j, "parse_hop")["parser_ops"][1]["parameters"][1].update(value="hops")),
    (r"\('I.learn'\).primitives\[0\] \('generate_digest'\): generate_digest: unknown learn list",
     lambda j: _action(j, "I.learn")["primitives"][0]["parameters"][1].update(value="0x7")),
    (r"\('I.learn'\).primitives\[1\] \('log_msg'\): log_msg: format "
     r"'learned src=\{\} port=\{\}' expects 2",
     lambda j: _action(j, "I.learn")["primitives"][1]["parameters"][1]["value"].pop()),
    (r"learn_lists\[0\] \('learn_t'\).elements\[0\]: unknown header instance 'ghost'",
     lambda j: j["learn_lists"][0]["elements"][0].update(value=["ghost", "x"])),
    (r"entries\[0\].match_key\[0\]: optional match with partial mask",
     lambda j: next(t for t in j["pipelines"][0]["tables"] if t["name"] == "I.pick")
     ["entries"][0]["match_key"][0].update(mask="0x0f")),
])
def test_bad_json_is_rejected_at_load(features_json: dict[str, Any], where: str,
                                      edit: Callable[[dict[str, Any]], None]) -> None:
    _mutated(features_json, where, edit)


def test_push_gives_a_zeroed_new_label(stk: Device) -> None:
    """setValid on the pushed (invalid) element zeroes its fields as bmv2's add_header does:
    the new label's tc is 0 even though the old top label, shifted down, had tc 5."""
    old = bytes(MPLS(label=200, cos=5, s=1, ttl=9))
    [(port, out)] = stk.process(1, bytes(ETH) + old + PAYLOAD)
    assert port == 4
    assert out == bytes(ETH) + bytes(MPLS(label=777, cos=0, s=0, ttl=64)) + old + PAYLOAD


@pytest.mark.parametrize("count, where", [
    ({"type": "field", "value": ["eth", "etype"]}, "push/pop count must be a constant"),
    ({"type": "hexstr", "value": "-0x1"}, "push/pop count '-0x1' is negative"),
])
def test_bad_push_pop_count_is_rejected(count: dict[str, Any], where: str) -> None:
    j = json.loads((GOLDEN / "compiler" / "stack.json").read_text())
    next(a for a in j["actions"] if a["name"] == "StkIngress.pop")["primitives"][0][
        "parameters"][1] = count
    with pytest.raises(ConfigError, match=r"\('StkIngress.pop'\).primitives\[0\] \('pop'\): "
                                          + where):
        Device.build_pipeline(j)


@pytest.mark.parametrize("fuse", [True, False])
def test_stack_last_in_an_action(fuse: bool) -> None:
    """A `stack_field` in an action (read and written) is chosen per packet; with an empty
    stack the write goes nowhere.  P4_16 allows `.last` only in parsers (netsum-p4c rejects
    it elsewhere, as p4c does), so the primitive is added to the compiled JSON by hand:
    `hops.last.val = hops.last.val + 1` as bmv2 JSON would spell it."""
    from netsum import p4c as compiler
    doc = compiler.compile_source(FEATURES_P4).bmv2_json
    last_val = {"type": "stack_field", "value": ["hops", "val"]}
    plus_one = {"type": "expression", "value": {"op": "+", "left": last_val,
                                                "right": {"type": "hexstr", "value": "0x01"}}}
    masked = {"type": "expression", "value": {"op": "&", "left": plus_one,
                                              "right": {"type": "hexstr", "value": "0xff"}}}
    to = next(a for a in doc["actions"] if a["name"] == "I.to")
    to["primitives"].append({"op": "assign",
                             "parameters": [last_val, {"type": "expression", "value": masked}]})
    dev = Device()
    dev.install(Pipeline(doc, fuse=fuse))
    rest = b"\x00\x00" + bytes(20)
    [(port, out)] = dev.process(1, feth(1, 0x88B5) + hop(11, 0) + hop(22, 1) + rest)
    assert port == 7 and out[14:18] == hop(11, 0) + hop(23, 1)
    [(port, out)] = dev.process(1, feth(1, 0x88B5) + hop(255, 1) + rest)
    assert port == 7 and out[14:16] == hop(0, 1)           # 8-bit wrap
    plain = feth(1, 0x0800) + bytes(30)
    assert dev.process(1, plain) == [(6, plain)]


def test_stack_of_mixed_types_is_rejected_for_stack_field() -> None:
    """A hand-made stack whose elements have different types cannot give `last.f` one width."""
    j = json.loads((GOLDEN / "compiler" / "stack.json").read_text())
    eth_id = next(h["id"] for h in j["headers"] if h["name"] == "eth")
    j["header_stacks"][0]["header_ids"][1] = eth_id
    j["header_types"] = [dict(t, fields=t["fields"] + [["bos", 8, False]])
                         if t["name"] == "ethernet_t" else t for t in j["header_types"]]
    with pytest.raises(ConfigError, match="header stack 'labels': elements of different types"):
        Device.build_pipeline(j)


@pytest.mark.parametrize("section, obj, where", [
    ("header_union_stacks", {"name": "us", "id": 0, "size": 2, "union_type": "u",
                             "header_union_ids": [7]},
     r"header_union_stacks\[0\] \('us'\): unknown header union id 7"),
    ("parse_vsets", {"name": "vs", "id": 0, "compressed_bitwidth": 16},
     r"parse_vsets\[0\] \('vs'\): bad max_size None"),
])
def test_unsupported_or_broken_sections_are_rejected_at_load(section: str, obj: dict[str, Any],
                                                   where: str) -> None:
    j = json.loads((GOLDEN / "compiler" / "stack.json").read_text())
    j[section] = [obj]
    with pytest.raises(ConfigError, match=where):
        Device.build_pipeline(j)
