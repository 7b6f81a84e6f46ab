"""netsum.workers.wire: packet and batch codecs, Ethernet/IPv4/UDP frames, and rejection of every kind
of bad input with WireError."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from netsum.wire import HEADER_BYTES, K_SUPPORTED, UDP_PORT, Flags, MsgType, packet_bytes
from netsum.workers import wire
from netsum.workers.errors import WireError

SRC = wire.Endpoint.parse("02:00:00:00:00:01", "10.0.0.1")
DST = wire.Endpoint.parse("02:00:00:00:00:fe", "10.0.0.254")


def header(**kw: int) -> wire.Header:
    base = dict(msg_type=MsgType.DATA, flags=Flags.NONE, job_id=7, slot=300, exp=130,
                count=0, round=0x01020305, offset=4096)
    base.update(kw)
    return wire.Header(**base)  # type: ignore[arg-type]


def values(k: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.integers(-(2**31), 2**31, size=k, dtype=np.int64).astype(np.int32)
    v[0], v[-1] = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    return v


def test_header_bytes_are_the_documented_layout() -> None:
    h = header(flags=Flags.RETX | Flags.NONFINITE, workers=4, dest=2, klog2=5, reason=6,
               length=0x0A0B0C0D)
    # The bytes worked out by hand from docs/protocol.md's field table (bit offset / 8,
    # big-endian), not from the codec's struct: a field moved or resized changes them.
    want = bytes.fromhex(
        "01"          # 0: msg_type DATA
        "03"          # 1: flags RETX | NONFINITE
        "0007"        # 2: job_id 7
        "012c"        # 4: slot 300
        "82"          # 6: exp 130
        "00"          # 7: count 0
        "01020305"    # 8: round
        "00001000"    # 12: offset 4096
        "04"          # 16: workers 4
        "02"          # 17: dest 2
        "06"          # 18: reason 6
        "05"          # 19: klog2 5
        "0a0b0c0d")   # 20: length
    assert HEADER_BYTES == len(want) == 24
    raw = wire.encode(h, None, 32)
    assert raw[:HEADER_BYTES] == want and raw[HEADER_BYTES:] == bytes(128)
    assert wire.pack(**{f.name: int(getattr(h, f.name)) for f in wire.HEADER_FIELDS}) == want
    assert wire.decode_header(want + bytes(128), 32) == h
    assert wire.encode_batch({f.name: int(getattr(h, f.name)) for f in wire.HEADER_FIELDS},
                             None, 32, count=2).tobytes() == 2 * (want + bytes(128))
    assert wire.decode_batch([want + bytes(128)], 32)[0]["reason"].tolist() == [6]
    # every single-field reader and the offsets
    for name, at in (("msg_type", 0), ("flags", 1), ("job_id", 2), ("slot", 4), ("exp", 6),
                     ("count", 7), ("round", 8), ("offset", 12), ("workers", 16),
                     ("dest", 17), ("reason", 18), ("klog2", 19), ("length", 20)):
        assert wire.field_offset(name) == at
        assert wire.field_reader((name,))(want) == (int(getattr(h, name)),)
    assert wire.field_reader(("length", "slot"))(want) == (0x0A0B0C0D, 300)
    at, layout = wire.field_writer(("exp", "count", "round"))
    buf = bytearray(HEADER_BYTES)
    layout.pack_into(buf, at, 0x82, 0, 0x01020305)
    assert buf[6:12] == want[6:12] and buf.count(0) == HEADER_BYTES - 5


@pytest.mark.parametrize("h", [
    header(msg_type=MsgType.REJECT, reason=1, workers=4),
    header(msg_type=MsgType.RESULT, flags=Flags.ACK | Flags.NONFINITE, count=3, dest=1),
])
def test_header_only_packets_round_trip(h: wire.Header) -> None:
    """A REJECT, and a RESULT with ACK, are the header alone (no values), at every K."""
    for k in K_SUPPORTED:
        raw = wire.encode(h, None, k)
        assert len(raw) == HEADER_BYTES and h.header_only
        pkt = wire.decode(raw, k)
        assert pkt.header == h and len(pkt.values) == 0
    with pytest.raises(WireError, match="no values"):
        wire.encode(h, values(32), 32)


@pytest.mark.parametrize("h, size, match", [
    (header(msg_type=MsgType.REJECT), HEADER_BYTES + 128, "header alone"),
    (header(msg_type=MsgType.RESULT, flags=Flags.ACK), HEADER_BYTES + 128, "header alone"),
    (header(msg_type=MsgType.RESULT), HEADER_BYTES, "carries 32 values"),
    (header(), HEADER_BYTES, "carries 32 values"),
])
def test_header_only_is_by_kind(h: wire.Header, size: int, match: str) -> None:
    """Whether a packet carries values follows from its type and flags, never from its size
    alone: a header-only kind with values, or a kind with values cut to the header, is
    refused."""
    raw = wire.pack(**{f.name: int(getattr(h, f.name)) for f in wire.HEADER_FIELDS})
    raw = raw.ljust(size, b"\0")
    with pytest.raises(WireError, match=match):
        wire.decode(raw, 32)


@pytest.mark.parametrize("k", K_SUPPORTED)
@pytest.mark.parametrize("h", [
    header(),
    header(msg_type=MsgType.RESULT, count=32, exp=0, round=0, slot=0, offset=0),
    header(job_id=0xFFFF, slot=(1 << 16) - 1, exp=255, round=(1 << 32) - 1,
           offset=(1 << 32) - 1, flags=Flags.RETX),
])
def test_round_trip(k: int, h: wire.Header) -> None:
    v = values(k)
    raw = wire.encode(h, v, k)
    assert len(raw) == HEADER_BYTES + 4 * k
    pkt = wire.decode(raw, k)
    assert pkt.header == h
    np.testing.assert_array_equal(pkt.values, v)
    assert np.frombuffer(raw, ">i4", offset=HEADER_BYTES)[0] == -(2**31)  # big-endian on wire


def test_pack_matches_encode() -> None:
    h = header(flags=Flags.RETX)
    fast = wire.pack(msg_type=1, flags=1, job_id=7, round=0x01020305, slot=300, exp=130,
                     count=0, offset=4096)
    assert fast == wire.encode(h, None, 32)[:HEADER_BYTES]


@pytest.mark.parametrize("fields, error", [
    ({"job": 7}, TypeError),
    ({"slot": 1 << 16}, WireError),
    ({"exp": -1}, WireError),
    ({"round": 1.5}, WireError),
])
def test_pack_refuses_what_is_not_a_header(fields: dict[str, float], error: type) -> None:
    with pytest.raises(error):
        wire.pack(**fields)


def test_batch_equals_single_packets_and_decodes_back() -> None:
    k, n = 32, 50
    v = np.stack([values(k, s) for s in range(n)])
    fields = {"msg_type": 1, "job_id": 9, "round": np.arange(n) * 3, "slot": np.arange(n),
              "exp": np.arange(n) + 100, "offset": np.arange(n) * k}
    rec = wire.encode_batch(fields, v, k)
    chunks = wire.batch_bytes(rec)
    assert len(chunks) == n and rec.tobytes() == b"".join(chunks)
    for i in (0, 17, n - 1):
        h = header(job_id=9, round=i * 3, slot=i, exp=100 + i, offset=i * k)
        assert chunks[i] == wire.encode(h, v[i], k)
    out, vals = wire.decode_batch(chunks, k)
    np.testing.assert_array_equal(vals, v)
    np.testing.assert_array_equal(out["slot"], np.arange(n))
    np.testing.assert_array_equal(out["round"], np.arange(n) * 3)


@pytest.mark.parametrize("raw, match", [
    (b"", "truncated"),
    (bytes(HEADER_BYTES), "msg_type 0"),
    (bytes(HEADER_BYTES + 1), "truncated"),
    (wire.encode(header(), None, 32)[:-1], "truncated"),
    (wire.encode(header(), None, 32) + b"\0", "too long"),
    (b"\x07" + wire.encode(header(), None, 32)[1:], "msg_type 7"),
    (b"\x00" + wire.encode(header(), None, 32)[1:], "msg_type 0"),
    (b"\x01\x80" + wire.encode(header(), None, 32)[2:], "flag bits 0x80"),
])
def test_decode_rejects(raw: bytes, match: str) -> None:
    with pytest.raises(WireError, match=match):
        wire.decode(raw, 32)


@pytest.mark.parametrize("field, value", [
    ("job_id", 1 << 16), ("slot", 1 << 16), ("round", 1 << 32), ("exp", 256),
    ("offset", 1 << 32),
    ("count", -1), ("exp", 1.5), ("slot", True),
])
def test_header_field_ranges(field: str, value: object) -> None:
    with pytest.raises(WireError, match=field):
        header(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("bad, match", [
    (np.zeros(31, np.int32), "values"),
    (np.zeros(32, np.float32), "integers"),
    (np.full(32, 2**31, np.int64), "int32"),
])
def test_encode_rejects_values(bad: np.ndarray, match: str) -> None:
    with pytest.raises(WireError, match=match):
        wire.encode(header(), bad, 32)


@pytest.mark.parametrize("fields, vals, match", [
    ({"slot": np.arange(3)}, np.zeros((4, 32), np.int32), "3 values for 4"),
    ({"sloot": 1}, np.zeros((1, 32), np.int32), "unknown header field 'sloot'"),
    ({"exp": np.array([256])}, np.zeros((1, 32), np.int32), "exp"),
    ({"exp": np.array([1.0])}, np.zeros((1, 32), np.int32), "integers"),
    ({}, np.zeros((2, 31), np.int32), "2x32"),
])
def test_encode_batch_rejects(fields: dict, vals: np.ndarray, match: str) -> None:
    with pytest.raises(WireError, match=match):
        wire.encode_batch(fields, vals, 32)


def test_decode_batch_names_bad_packet() -> None:
    good = wire.encode(header(), None, 32)
    with pytest.raises(WireError, match="packet 1"):
        wire.decode_batch([good, good[:-2]], 32)
    with pytest.raises(WireError, match="packet 2"):
        wire.decode_batch([good, good, b"\x09" + good[1:]], 32)


@pytest.mark.parametrize("k", [16, 33, 0, "32", True])
def test_unsupported_k(k: object) -> None:
    with pytest.raises(WireError, match="K must be one of"):
        wire.decode(b"", k)  # type: ignore[arg-type]


# ---- frames -----------------------------------------------------------------------------


def test_frame_is_what_scapy_sees() -> None:
    payload = wire.encode(header(), values(32), 32)
    frame = wire.build_frame(SRC, DST, payload)
    assert len(frame) == packet_bytes(32)
    p = Ether(frame)
    assert p.src == "02:00:00:00:00:01" and p.dst == "02:00:00:00:00:fe"
    assert p[IP].src == "10.0.0.1" and p[IP].dst == "10.0.0.254" and p[IP].ttl == 64
    assert p[UDP].sport == UDP_PORT and p[UDP].dport == UDP_PORT and p[UDP].chksum == 0
    assert p[UDP].len == 8 + len(payload) and bytes(p[UDP].payload) == payload
    ref = p[IP].chksum
    del p[IP].chksum
    assert Ether(bytes(p))[IP].chksum == ref  # scapy recomputes the same checksum


def scapy_frame(**over: object) -> bytes:
    payload = over.pop("payload", wire.encode(header(msg_type=MsgType.RESULT, count=2), None, 32))
    ip = dict(src="10.0.0.254", dst="10.0.0.1")
    udp = dict(sport=UDP_PORT, dport=5000)
    ip.update({k[3:]: v for k, v in over.items() if k.startswith("ip_")})
    udp.update({k[4:]: v for k, v in over.items() if k.startswith("udp_")})
    eth = {k[4:]: v for k, v in over.items() if k.startswith("eth_")}
    return bytes(Ether(src="02:00:00:00:00:fe", dst="02:00:00:00:00:01", **eth) / IP(**ip)
                 / UDP(**udp) / Raw(payload))


def test_parse_scapy_frame_with_udp_checksum_and_padding() -> None:
    frame = scapy_frame()
    assert Ether(frame)[UDP].chksum != 0  # scapy computes it: checked, accepted
    parsed = wire.parse_frame(frame + b"\0" * 6, 32)  # Ethernet padding is allowed
    assert parsed.packet.header.msg_type is MsgType.RESULT and parsed.packet.header.count == 2
    assert parsed.src.port == UDP_PORT and parsed.dst.port == 5000
    assert parsed.src.ip == bytes([10, 0, 0, 254])


def _patch(frame: bytes, at: int, new: bytes, fix_ip: bool = True) -> bytes:
    out = bytearray(frame)
    out[at:at + len(new)] = new
    if fix_ip:
        out[24:26] = b"\0\0"
        out[24:26] = struct.pack("!H", wire.ipv4_checksum(bytes(out[14:34])))
    return bytes(out)


GOOD = wire.build_frame(SRC, DST, wire.encode(header(), None, 32))


@pytest.mark.parametrize("frame, match", [
    (GOOD[:41], "truncated"),
    (GOOD[:60], "truncated: IPv4 total length"),
    (GOOD[:-1], "truncated"),
    (_patch(GOOD, 12, b"\x86\xdd"), "ethertype 0x86dd"),
    (_patch(GOOD, 14, b"\x65"), "version field is 6"),
    (_patch(GOOD, 14, b"\x44"), "IHL 4"),
    (_patch(GOOD, 16, b"\x00\x10"), "too small"),
    (_patch(GOOD, 22, b"\x11", fix_ip=False), "checksum mismatch"),
    (_patch(GOOD, 20, b"\x20\x00"), "fragment"),
    (_patch(GOOD, 23, b"\x06"), "not UDP"),
    (_patch(GOOD, 38, b"\x00\x09"), "UDP length"),
    (_patch(GOOD, 34, b"\x13\x88\x13\x88"), "netsum port"),
    (_patch(GOOD, 40, b"\x12\x34"), "UDP checksum mismatch"),
    (scapy_frame(payload=b"\x02" * 20), "netsum packet truncated"),
    (scapy_frame(payload=b"\x05" + bytes(HEADER_BYTES + 127)), "msg_type 5"),
])
def test_parse_frame_rejects(frame: bytes, match: str) -> None:
    with pytest.raises(WireError, match=match):
        wire.parse_frame(frame, 32)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(GOOD) - 1), st.integers(1, 255))
def test_corrupted_frame_never_crashes(at: int, xor: int) -> None:
    bad = bytearray(GOOD)
    bad[at] ^= xor
    try:
        parsed = wire.parse_frame(bytes(bad), 32)
    except WireError:
        return
    # Accepted only if the flipped byte is one no check covers: a MAC, one UDP port while the
    # other is still the netsum port, or netsum fields/values (UDP checksum 0 = "not computed";
    # the IPv4 header checksum catches every single-byte change of the IP header).
    assert at < 12 or 34 <= at < 38 or at >= 42, at
    assert parsed.payload == bytes(bad[42:])


@settings(deadline=None)  # a loaded CI machine must not fail a correct test
@given(st.binary(max_size=300))
def test_random_bytes_only_raise_wire_error(data: bytes) -> None:
    for fn in (wire.parse_frame, wire.decode):
        try:
            fn(data, 32)
        except WireError:
            pass


@pytest.mark.parametrize("mac, ip, port, match", [
    ("02:00:00:00:00", "10.0.0.1", UDP_PORT, "MAC"),
    ("zz:00:00:00:00:01", "10.0.0.1", UDP_PORT, "MAC"),
    ("02:00:00:00:00:01", "10.0.0.300", UDP_PORT, "IPv4"),
    ("02:00:00:00:00:01", "10.0.0.1", 0, "port"),
    (b"\x02\x00", "10.0.0.1", UDP_PORT, "6 bytes"),
])
def test_endpoint_rejects(mac: str, ip: str, port: int, match: str) -> None:
    with pytest.raises(WireError, match=match):
        wire.Endpoint.parse(mac, ip, port)


def test_prefix_rejects_wrong_length() -> None:
    prefix = wire.FramePrefix.build(SRC, DST, 140)
    with pytest.raises(WireError, match="140"):
        prefix.frame(b"x" * 10)


@pytest.mark.parametrize("call", [
    lambda: wire.decode("x" * 140, 32),
    lambda: wire.decode(None, 32),
    lambda: wire.parse_frame(12345, 32),
    lambda: wire.encode(None, None, 32),
    lambda: wire.decode_batch([], 32),
    lambda: wire.decode_batch(b"abc", 32),
    lambda: wire.decode_batch(["x" * 140], 32),
])
def test_wrong_types_are_wire_errors(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(WireError):
        call()


@pytest.mark.parametrize("h", [header(), header(msg_type=MsgType.RESULT, count=9, round=0,
                                               offset=(1 << 32) - 1, exp=255, flags=Flags.RETX)])
def test_unpack_matches_decode(h: wire.Header) -> None:
    raw = wire.encode(h, None, 32)
    assert wire.unpack(raw) == tuple(int(getattr(h, f.name)) for f in wire.HEADER_FIELDS)
    assert wire.unpack_fields(raw) == {f.name: int(getattr(h, f.name))
                                       for f in wire.HEADER_FIELDS}


# ---- what a worker takes: from its switch, to itself -------------------------------------

RESULT_FRAME = wire.build_frame(DST, SRC, wire.encode(header(msg_type=MsgType.RESULT, count=2),
                                                      values(32), 32))


def test_fast_path_checks_both_peers() -> None:
    """netsum_payload takes a frame only from the service (MAC, IPv4, UDP_PORT) to this
    worker (MAC, IPv4, port); anything else goes to the full path."""
    assert wire.netsum_payload(RESULT_FRAME, 32, SRC, DST) == RESULT_FRAME[42:]
    other = wire.Endpoint.parse("02:00:00:00:00:09", "10.0.0.9")
    for local, service in ((other, DST), (SRC, other),
                           (wire.Endpoint(SRC.mac, SRC.ip, 9), DST),
                           (wire.Endpoint(other.mac, SRC.ip, SRC.port), DST),
                           (SRC, wire.Endpoint(DST.mac, DST.ip, 9)),
                           (SRC, wire.Endpoint(other.mac, DST.ip, DST.port))):
        assert wire.netsum_payload(RESULT_FRAME, 32, local, service) is None, (local, service)
        with pytest.raises(WireError, match="differs"):
            wire.check_peers(wire.parse_frame(RESULT_FRAME, 32), local, service)
    wire.check_peers(wire.parse_frame(RESULT_FRAME, 32), SRC, DST)


def test_header_only_frames_take_the_full_path() -> None:
    ack = wire.build_frame(DST, SRC, wire.encode(
        header(msg_type=MsgType.RESULT, flags=Flags.ACK, count=2), None, 32))
    assert wire.netsum_payload(ack, 32, SRC, DST) is None
    parsed = wire.parse_frame(ack, 32)
    assert parsed.packet.header.flags == Flags.ACK and len(parsed.payload) == HEADER_BYTES


def test_options_are_skipped_and_the_frame_still_checked() -> None:
    """IPv4 options move the UDP header: parse_frame reads it behind them (IHL 6 here)."""
    payload = wire.encode(header(msg_type=MsgType.RESULT, count=2), values(32), 32)
    frame = bytes(Ether(src="02:00:00:00:00:fe", dst="02:00:00:00:00:01")
                  / IP(src="10.0.0.254", dst="10.0.0.1", options=[b"\x01\x01\x01\x01"])
                  / UDP(sport=UDP_PORT, dport=UDP_PORT) / Raw(payload))
    assert frame[14] == 0x46
    assert wire.netsum_payload(frame, 32, SRC, DST) is None      # never the fast path
    assert wire.parse_frame(frame, 32).payload == payload
