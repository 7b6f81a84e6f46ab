"""Differential test of the workers' receive fast path for frames coming out of the switch:
`wire.netsum_payload` must never accept a frame that `wire.parse_frame` (plus the destination
check of FrameTransport) would reject or parse differently, and must take the common case."""
from __future__ import annotations

import random
import socket


from netsum.wire import HEADER_BYTES, MsgType
from netsum.workers import wire
from netsum.workers.transport import FrameTransport

import p4helpers

K = 32
ME = p4helpers.worker_host(0)


def _result_frame(rng: random.Random, zero_udp_csum: bool = True) -> bytes:
    f = bytearray(p4helpers.netsum_frame(
        ME, job_id=rng.randrange(4), slot=rng.randrange(256), round=rng.randrange(4),
        values=[rng.randrange(-(1 << 31), 1 << 31) for _ in range(K)],
        msg_type=rng.choice([MsgType.RESULT, MsgType.DATA]), flags=rng.choice([0, 1]),
        exp=rng.randrange(256), dst_mac=ME.mac, dst_ip=ME.ip))
    if zero_udp_csum:
        f[40:42] = b"\0\0"                     # as the switch sends results
    return bytes(f)


def _reference(frame: bytes, dst_ip: bytes | None) -> bytes | None:
    if len(frame) < 14 or frame[12:14] != b"\x08\x00":
        return None
    try:
        parsed = wire.parse_frame(frame, K)
    except wire.WireError:
        return None
    if dst_ip is not None and parsed.dst.ip != dst_ip:
        return None
    return parsed.payload


def test_fast_path_agrees_with_parse_frame() -> None:
    rng = random.Random(5)
    me = wire.Endpoint.parse(ME.mac, ME.ip).ip
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
        dst = me if n % 2 else None
        fast = wire.netsum_payload(bytes(frame), K, dst)
        ref = _reference(bytes(frame), dst)
        if fast is not None:
            assert fast == ref
            taken += 1
    assert taken > 1000                        # the common case really takes the fast path


def test_frame_transport_counts_unchanged() -> None:
    rng = random.Random(1)
    sw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sw.bind(("127.0.0.1", 0))
    local = wire.Endpoint.parse(ME.mac, ME.ip)
    service = wire.Endpoint.parse(p4helpers.SERVICE_MAC, p4helpers.SERVICE_IP)
    with FrameTransport(sw.getsockname(), local, service, k=K) as t:
        good = _result_frame(rng)
        bad_csum = bytearray(good)
        bad_csum[24] ^= 0xFF                   # IPv4 header checksum broken
        other = bytearray(good)
        other[30:34] = bytes([10, 9, 9, 9])    # addressed to someone else (checksum fixed up)
        other[24:26] = b"\0\0"
        other[24:26] = wire.ipv4_checksum(bytes(other[14:34])).to_bytes(2, "big")
        for f in (good, bytes(bad_csum), bytes(other)):
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
