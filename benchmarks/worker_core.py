"""Per-packet cost of the sans-I/O worker core, measured side by side with the floor of the
same work done bare (pack a header, quantize one block, unpack a header, store the values):
the ratio is the core's bookkeeping overhead (window, timers, acceptance, statistics).  The
"switch" is an in-process echo turning each DATA into its RESULT (a one-worker job), so no
socket or switch cost is included.  Not a test: run it by hand.

With --loop, also the whole worker loop (`allreduce` over a FrameTransport, real UDP sockets on
127.0.0.1) against an echo process that turns each DATA frame into its RESULT, next to a bare
loop over the same sockets keeping the same number of frames in flight (send, receive, send
the next): worker CPU per packet for both, and the ratio.

    .venv/bin/python benchmarks/worker_core.py [--blocks 20000] [--slots 256] [--repeat 3]
                                               [--loop]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import time
from typing import Any

import numpy as np

from netsum.tensors import check_result, reference
from wireformat import HEADER_BYTES, MsgType
from workers import quant, wire
from workers.core import JobConfig, Timing, WorkerCore


def to_result(packet: bytes) -> bytes:
    # msg_type is byte 0, count byte 7 (HEADER_FIELDS); the values are the one-worker sum.
    return bytes((MsgType.RESULT,)) + packet[1:7] + b"\x01" + packet[8:]


def run_core(x: np.ndarray, slots: int) -> tuple[int, float]:
    core = WorkerCore(x, JobConfig(1, 1, slots), Timing())
    t = time.perf_counter()
    pending = list(core.start(0.0).send)
    n = 0
    while pending:
        n += 1
        pending += core.receive(to_result(pending.pop()), 0.001).send
    dt = time.perf_counter() - t
    res = core.result()
    assert check_result(res.tensor, reference([x], 32)).ok   # the bound the input gives
    return n, dt


def run_bare(x: np.ndarray) -> tuple[int, float]:
    codec = wire.header_codec()
    rows = quant.blocks(x, 32)
    sums = np.zeros_like(rows, dtype=np.int32)
    s = quant.scale_shift(1)
    t = time.perf_counter()
    for b in range(len(rows)):
        pkt = codec.pack(msg_type=1, job_id=1, slot=b % 256, exp=127, offset=b * 32) \
            + quant.quantize_block(rows[b], 127, s)
        codec.unpack(to_result(pkt))
        sums[b] = np.frombuffer(pkt, ">i4", offset=HEADER_BYTES)
    return len(rows), time.perf_counter() - t


def _echo(port_q: Any, stop: Any) -> None:
    """The stand-in switch: each frame back to its sender as the RESULT of a one-worker job
    (MACs, IPv4 addresses swapped; msg_type RESULT, count 1; UDP checksum 0 as the switch)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.2)
    port_q.put(s.getsockname()[1])
    eth_ip = wire.ETH_BYTES + wire.IPV4_BYTES
    while not stop.is_set():
        try:
            d, addr = s.recvfrom(65536)
        except socket.timeout:
            continue
        b = bytearray(d)
        b[0:6], b[6:12] = d[6:12], d[0:6]
        b[26:30], b[30:34] = d[30:34], d[26:30]
        b[24:26] = b"\0\0"
        b[24:26] = wire.ipv4_checksum(bytes(b[14:34])).to_bytes(2, "big")
        b[eth_ip + 6:eth_ip + 8] = b"\0\0"
        p = eth_ip + wire.UDP_BYTES
        b[p] = MsgType.RESULT
        b[p + 7] = 1
        s.sendto(bytes(b), addr)


def run_loops(x: np.ndarray, slots: int) -> tuple[tuple[int, float], tuple[int, float]]:
    """(packets, worker CPU seconds) of allreduce() and of the bare loop, same echo."""
    from workers.api import allreduce
    from workers.transport import FrameTransport
    q: Any = mp.Queue()
    stop = mp.Event()
    proc = mp.Process(target=_echo, args=(q, stop), daemon=True)
    proc.start()
    port = q.get()
    try:
        local = wire.Endpoint.parse("02:00:00:00:00:01", "10.0.0.1")
        service = wire.Endpoint.parse("02:00:00:00:00:fe", "10.0.0.254")
        job = JobConfig(1, 1, slots)
        with FrameTransport(("127.0.0.1", port), local, service, k=32) as t:
            allreduce(x[:32 * 500], t, job)                    # warm-up
            c0 = time.process_time()
            r = allreduce(x, t, job)
            core = (r.stats.packets_sent, time.process_time() - c0)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        frame = wire.FramePrefix.build(local, service, HEADER_BYTES + 128).data + \
            wire.header_codec().pack(msg_type=1, job_id=1) + bytes(128)
        dest = ("127.0.0.1", port)
        n = core[0]
        c0 = time.process_time()
        for _ in range(min(slots, n)):
            s.sendto(frame, dest)
        for i in range(n):
            s.recv(65536)
            if i + slots < n:
                s.sendto(frame, dest)
        bare = (n, time.process_time() - c0)
        s.close()
        return core, bare
    finally:
        stop.set()
        proc.join(2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=20000)
    p.add_argument("--slots", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--loop", action="store_true", help="also the socket loop (see above)")
    a = p.parse_args()
    x = np.random.default_rng(0).uniform(-1, 1, 32 * a.blocks).astype(np.float32)
    bare = min((run_bare(x) for _ in range(a.repeat)), key=lambda r: r[1])
    core = min((run_core(x, a.slots) for _ in range(a.repeat)), key=lambda r: r[1])
    print(f"{a.blocks} blocks of 32, window {a.slots}, best of {a.repeat}")
    for name, (n, dt) in (("bare pack/quantize/unpack/store", bare),
                          ("WorkerCore send+receive", core)):
        print(f"  {name:34s} {n / dt / 1e3:8.1f} k packets/s  {dt / n * 1e6:6.1f} us/packet  "
              f"{dt / n / (bare[1] / bare[0]):5.2f}x the bare cost")

    if a.loop:
        runs = [run_loops(x, a.slots) for _ in range(a.repeat)]
        core_us = sorted(c[1] / c[0] * 1e6 for c, _ in runs)[len(runs) // 2]
        bare_us = sorted(b[1] / b[0] * 1e6 for _, b in runs)[len(runs) // 2]
        print(f"  socket loop, median of {a.repeat}: allreduce() {core_us:6.1f} us CPU/packet | "
              f"bare send/recv loop {bare_us:6.1f} us CPU/packet | ratio {core_us / bare_us:5.2f}")


if __name__ == "__main__":
    main()