"""Worker CPU per packet, next to the bare floor of the same work measured in the same run.

    .venv/bin/python benchmarks/worker_core.py [--k 32,256] [--blocks 10000] [--slots 256]
                                               [--repeat 3] [--no-loop]

In-process (no sockets): the sans-I/O core of a one-worker job against an in-process echo
that turns each DATA into its RESULT, through both of its faces - the Step API (bytes in,
bytes and events out) and the frames API of the hot path - next to the bare floor of the same
work (pack a header, quantize one block, unpack a header, store the values).

Socket loops (the number that matters): one worker's whole `allreduce()` over a FrameTransport
and over a UdpTransport, against an echo process that turns each DATA into its RESULT (a
one-worker job; for frames it swaps the addresses, which leaves the IPv4 checksum valid), next
to a bare loop over the same kind of socket keeping as many frames of the same size in flight
(recv_into a preallocated buffer, send a prebuilt frame; a frame lost on the way is sent
again after 0.2 s).  CPU time of this process only (the echo runs in its own), per packet:
the ratio is the worker's cost over the floor any Python worker pays for its syscalls.
Each figure is the median of --repeat runs; the load average is printed (the machine is shared).
With PYTHONPATH=DIR the script measures the workers of checkout DIR, whose `netsum` package
then comes before the installed one (benchmarks/worker_trees.py runs it so for two versions side
by side; both must have the netsum.* layout).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np


from netsum.tensors import check_result, reference
from netsum.wire import HEADER_BYTES, MsgType
from netsum.workers import quant, wire
from netsum.workers.core import JobConfig, Timing, WorkerCore

# The header codec of the tree measured: wire.OFFSETS / pack / unpack, or, in a tree from
# before them (benchmarks/worker_trees.py measures those too), its unit table and HeaderCodec.
if hasattr(wire, "OFFSETS"):
    _AT: dict[str, int] = wire.OFFSETS
    _pack: Callable[..., bytes] = wire.pack
    _unpack: Callable[[bytes], tuple[int, ...]] = wire.unpack
else:
    _AT = {u.fields[0][0]: u.offset for u in wire.header_units()  # type: ignore[attr-defined]
           if len(u.fields) == 1}
    _pack = wire.header_codec().pack  # type: ignore[attr-defined]
    _unpack = wire.header_codec().unpack  # type: ignore[attr-defined]
_MSG, _COUNT = _AT["msg_type"], _AT["count"]


def to_result(packet: bytes) -> bytes:
    """The RESULT of a one-worker job: the contribution itself, msg_type RESULT, count 1."""
    b = bytearray(packet)
    b[_MSG], b[_COUNT] = MsgType.RESULT, 1
    return bytes(b)


def run_steps(x: np.ndarray, k: int, slots: int) -> tuple[int, float]:
    """The Step API, results in send order on a virtual clock (1 us per packet)."""
    core = WorkerCore(x, JobConfig(1, 1, slots, k), Timing())
    t = time.process_time()
    pending = deque(core.start(0.0).send)
    n = 0
    while pending:
        n += 1
        pending += core.receive(to_result(pending.popleft()), n * 1e-6).send
    dt = time.process_time() - t
    assert check_result(core.result().tensor, reference([x], k)).ok  # the inputs' bound
    return n, dt


def run_frames(x: np.ndarray, k: int, slots: int) -> tuple[int, float]:
    """The frames API, one result at a time (no batching: the worst case of the hot path)."""
    core = WorkerCore(x, JobConfig(1, 1, slots, k), Timing())
    size = core.packet_bytes
    rx = [memoryview(bytearray(size))]
    t = time.process_time()
    pending = deque(core.start_frames(0.0))
    frames = core.frames
    n = 0
    while pending:
        n += 1
        rx[0][:] = frames[pending.popleft()]
        rx[0][_MSG], rx[0][_COUNT] = MsgType.RESULT, 1
        pending += core.receive_frames(rx, 1, n * 1e-6)
    dt = time.process_time() - t
    assert check_result(core.result().tensor, reference([x], k)).ok
    return n, dt


def run_bare(x: np.ndarray, k: int) -> tuple[int, float]:
    rows = quant.blocks(x, k)
    sums = np.zeros_like(rows, dtype=np.int32)
    s = quant.scale_shift(1)
    t = time.process_time()
    for b in range(len(rows)):
        pkt = _pack(msg_type=1, job_id=1, slot=b % 256, exp=127, offset=b * k) \
            + quant.quantize_block(rows[b], 127, s)
        _unpack(to_result(pkt))
        sums[b] = np.frombuffer(pkt, ">i4", offset=HEADER_BYTES)
    return len(rows), time.process_time() - t


# -- socket loops -------------------------------------------------------------------------------

def _echo(port_q: Any, stop: Any, frames: bool) -> None:
    """The stand-in switch: each datagram back to its sender as the RESULT of a one-worker job
    (frames: MACs and IPv4 addresses swapped - the IPv4 checksum stays valid - UDP checksum
    0 as the switch sends results)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.2)
    port_q.put(s.getsockname()[1])
    p = wire.ETH_BYTES + wire.IPV4_BYTES + wire.UDP_BYTES if frames else 0
    buf = bytearray(2048)
    view = memoryview(buf)
    while not stop.is_set():
        try:
            n, addr = s.recvfrom_into(buf)
        except socket.timeout:
            continue
        if frames and n >= p:
            buf[0:6], buf[6:12] = buf[6:12], buf[0:6]
            buf[26:30], buf[30:34] = buf[30:34], buf[26:30]
            buf[40:42] = b"\0\0"
        if n > p + _COUNT:
            buf[p + _MSG], buf[p + _COUNT] = MsgType.RESULT, 1
        s.sendto(view[:n], addr)


def _bare_loop(port: int, size: int, window: int, packets: int) -> float:
    """CPU seconds of a loop keeping `window` frames of `size` bytes in flight for `packets`."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.2)
    frame = bytes(size)
    buf = memoryview(bytearray(2048))
    dest = ("127.0.0.1", port)
    c0 = time.process_time()
    for _ in range(min(window, packets)):
        s.sendto(frame, dest)
    got = 0
    while got < packets:
        try:
            s.recv_into(buf)
        except socket.timeout:
            s.sendto(frame, dest)          # lost on the way: keep the window full
            continue
        got += 1
        if got + window <= packets:
            s.sendto(frame, dest)
    dt = time.process_time() - c0
    s.close()
    return dt


def _syscalls(batched: bool) -> str | None:
    """Switch the transports' system calls (workers/mmsg.py) for sockets opened from now on:
    the name of the path in use, None when the tree measured has no batched path."""
    try:
        from netsum.workers import mmsg
    except ImportError:
        return None
    mmsg.enable(batched)
    why = mmsg.unavailable_reason()
    return "recvmmsg/sendmmsg" if why is None else f"recv_into/sendto ({why})"


def run_loops(x: np.ndarray, k: int, slots: int, frames: bool,
              paths: tuple[bool, ...] = (True,)) -> tuple[list[float], float]:
    """([allreduce per path of `paths` (batched syscalls or not)], bare loop) worker CPU
    microseconds per packet sent, same echo process."""
    from netsum.workers.api import allreduce
    from netsum.workers.transport import FrameTransport, Transport, UdpTransport
    ctx = mp.get_context("spawn")
    q, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_echo, args=(q, stop, frames), daemon=True)
    proc.start()
    port = q.get(timeout=30)
    try:
        job = JobConfig(1, 1, slots, k)
        local = wire.Endpoint.parse("02:00:00:00:00:01", "10.0.0.1")
        service = wire.Endpoint.parse("02:00:00:00:00:fe", "10.0.0.254")
        per: list[float] = []
        n = 1
        for batched in paths:
            _syscalls(batched)
            t: Transport
            if frames:
                t = FrameTransport(("127.0.0.1", port), local, service, k=k)
            else:
                t = UdpTransport(("127.0.0.1", port), bind=("127.0.0.1", 0))
            try:
                allreduce(x[:k * 500], t, job)                   # warm-up
                c0 = time.process_time()
                r = allreduce(x, t, job)
                dt = time.process_time() - c0
                assert check_result(r.tensor, reference([x], k)).ok
                n = r.stats.packets_sent
            finally:
                t.close()
            per.append(dt / n * 1e6)
        _syscalls(True)
        size = (wire.ETH_BYTES + wire.IPV4_BYTES + wire.UDP_BYTES if frames else 0) \
            + HEADER_BYTES + 4 * k
        bare = _bare_loop(port, size, slots, n)
        return per, bare / n * 1e6
    finally:
        stop.set()
        proc.join(5)
        if proc.is_alive():
            proc.kill()


def _median(runs: list[tuple[int, float]]) -> float:
    return statistics.median(dt / n * 1e6 for n, dt in runs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", default="32,256", help="values per packet, comma-separated")
    p.add_argument("--blocks", type=int, default=10000, help="packets of data per run")
    p.add_argument("--slots", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-loop", action="store_true", help="skip the socket loops")
    a = p.parse_args()
    print(f"{a.blocks} blocks per run, window {a.slots}, medians of {a.repeat} runs; load "
          f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; CPU us per packet")
    for k in (int(v) for v in a.k.split(",")):
        x = np.random.default_rng(k).uniform(-1, 1, k * a.blocks).astype(np.float32)
        run: Callable[[Callable[[], tuple[int, float]]], float] = \
            lambda f: _median([f() for _ in range(a.repeat)])
        bare = run(lambda: run_bare(x, k))
        steps = run(lambda: run_steps(x, k, a.slots))
        line = (f"K={k:3d} in-process: bare pack/quantize/unpack/store {bare:6.1f} | "
                f"WorkerCore Step API {steps:6.1f} ({steps / bare:4.2f}x)")
        if hasattr(WorkerCore, "start_frames"):   # (a tree before the frames API has none)
            fast = run(lambda: run_frames(x, k, a.slots))
            line += f" | frames API {fast:6.1f} ({fast / bare:4.2f}x)"
        print(line, flush=True)
        if a.no_loop:
            continue
        default = _syscalls(True)
        # Both system-call paths where the tree has the batched one (alternating which runs
        # first in each repeat), the default path's line first (benchmarks/worker_trees.py
        # reads it).
        both = default is not None and default.startswith("recvmmsg")
        for frames in (True, False):
            runs = []
            for r in range(a.repeat):
                order = ((True, False) if r % 2 == 0 else (False, True)) if both else (True,)
                per, bare_us = run_loops(x, k, a.slots, frames, order)
                runs.append((dict(zip(order, per)), bare_us))
            core_us = statistics.median(p[True] for p, _ in runs)
            bare_us = statistics.median(b for _, b in runs)
            ratio = statistics.median(p[True] / b for p, b in runs)
            name = "FrameTransport" if frames else "UdpTransport  "
            print(f"K={k:3d} socket loop, {name}: allreduce() {core_us:6.1f} | bare send/recv "
                  f"loop {bare_us:6.1f} | ratio {ratio:5.2f} | {default or 'recv_into/sendto'}",
                  flush=True)
            if both:
                old_us = statistics.median(p[False] for p, _ in runs)
                gain = statistics.median(p[False] / p[True] for p, _ in runs)
                print(f"K={k:3d} socket loop, {name}: recv_into/sendto (NETSUM_MMSG=0) "
                      f"{old_us:6.1f} | recvmmsg/sendmmsg {core_us:6.1f} | old / new "
                      f"{gain:5.2f}", flush=True)


if __name__ == "__main__":
    main()
