"""Differential test of the workers' receive fast path for frames coming out of the switch:
`wire.netsum_payload` must never accept a frame that `wire.parse_frame` (plus the peer check of
FrameTransport, `wire.check_peers`) would reject or parse differently, and must take the common
case."""
from __future__ import annotations

import random
import socket


from netsum.wire import HEADER_BYTES, UDP_PORT, Flags, MsgType
from netsum.workers import wire
from netsum.workers.transport import FrameTransport

import p4helpers

K = 32
ME = p4helpers.worker_host(0)
SERVICE = p4helpers.Host(0, p4helpers.SERVICE_MAC, p4helpers.SERVICE_IP, UDP_PORT)
LOCAL = wire.Endpoint.parse(ME.mac, ME.ip, ME.udp_port)
SERVICE_END = wire.Endpoint.parse(SERVICE.mac, SERVICE.ip, UDP_PORT)


def _result_frame(rng: random.Random, zero_udp_csum: bool = True) -> bytes:
    kind = rng.choice([MsgType.RESULT, MsgType.DATA, MsgType.STATUS, MsgType.REJECT])
    flags = rng.choice([0, Flags.RETX, Flags.NONFINITE, Flags.ACK])
    bare = kind == MsgType.REJECT or (kind == MsgType.RESULT and flags == Flags.ACK)
    f = bytearray(p4helpers.netsum_frame(
        SERVICE, job_id=rng.randrange(4), slot=rng.randrange(256), round=rng.randrange(4),
        values=[] if bare else [rng.randrange(-(1 << 31), 1 << 31) for _ in range(K)],
        msg_type=kind, flags=flags, exp=rng.randrange(256), dst_mac=ME.mac, dst_ip=ME.ip,
        dst_port=ME.udp_port))
    if zero_udp_csum:
        f[40:42] = b"\0\0"                     # as the switch sends results
    return bytes(f)


def _reference(frame: bytes, peers: bool) -> bytes | None:
    if len(frame) < 14 or frame[12:14] != b"\x08\x00":
        return None
    try:
        parsed = wire.parse_frame(frame, K)
        if peers:
            wire.check_peers(parsed, LOCAL, SERVICE_END)
    except wire.WireError:
        return None
    return parsed.payload


def test_fast_path_agrees_with_parse_frame() -> None:
    rng = random.Random(5)
    taken = 0
    for n in range(3000):
        frame = bytearray(_result_frame(rng, zero_udp_csum=rng.random() < 0.8))
        roll = rng.random()
        if roll < 0.4:                         # one corrupted byte anywhere in the headers
            at = rng.randrange(HEADER_BYTES + 42)
            frame[at] = rng.randrange(256)
        elif roll < 0.5:                       # cut short or padded
            frame = frame[:rng.randrange(len(frame))] if rng.random() < 0.5 else \
                frame + bytes(rng.randrange(1, 20))
        peers = bool(n % 2)
        fast = wire.netsum_payload(bytes(frame), K, LOCAL if peers else None,
                                   SERVICE_END if peers else None)
        ref = _reference(bytes(frame), peers)
        if fast is not None:
            assert fast == ref
            taken += 1
    assert taken > 600                         # the common case really takes the fast path


def test_frame_transport_counts_unchanged() -> None:
    sw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sw.bind(("127.0.0.1", 0))
    with FrameTransport(sw.getsockname(), LOCAL, SERVICE_END, k=K) as t:
        good = p4helpers.netsum_frame(
            SERVICE, job_id=1, slot=2, values=list(range(K)), msg_type=MsgType.RESULT,
            dst_mac=ME.mac, dst_ip=ME.ip, dst_port=ME.udp_port)
        good = good[:40] + b"\0\0" + good[42:]
        bad_csum = bytearray(good)
        bad_csum[24] ^= 0xFF                   # IPv4 header checksum broken
        other = bytearray(good)
        other[30:34] = bytes([10, 9, 9, 9])    # addressed to someone else (checksum fixed up)
        other[24:26] = b"\0\0"
        other[24:26] = wire.ipv4_checksum(bytes(other[14:34])).to_bytes(2, "big")
        for f in (good, bytes(other), bytes(bad_csum)):
            sw.sendto(f, t.address)
        got: list[bytes] = []
        for _ in range(50):
            got += t.receive(0.1)
            if t.counters.received == 3:
                break
        sw.close()
    assert got == [good[42:]]
    assert (t.counters.malformed, t.counters.foreign) == (1, 1)
    assert "checksum" in t.counters.last_error
