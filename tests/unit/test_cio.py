"""The worker's I/O loops in C (workers/cio.py, wio.c) against the Python loops they replace.

One job of n workers is run three times on the same deterministic traffic -- the I/O in C
(`cio`), the compiled core with the transports' Python loops (`pyio`, NETSUM_WORKER_CIO=0)
and the Python core (`py`, NETSUM_WORKER_NATIVE=0) -- each worker a real `Driver` over a
real transport (kernel UDP, UDP-tunnel frames, shared-memory rings), the switch played by
the test (tests/oracle.py: a correct switch behind links that lose, duplicate and reorder,
on a virtual clock), hostile datagrams mixed into what the workers receive.  Every run must
send the same frames in the same order from every worker, end with the same sums bit for
bit, the same statistics and the same transport counters; the sums must also match the
float64 reference.  Over the rings, descriptors pointing outside the ring and an impossible
head are written into the region by hand: counted as the Python consumer counts them.
"""
from __future__ import annotations

import heapq
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from oracle import LossyLink, OracleSwitch

from netsum.shmring import DESC, HEAD, TO_PEER, Layout, ShmServer
from netsum.tensors import check_result, reference
from netsum.wire import HEADER_BYTES, UDP_PORT, Flags, MsgType
from netsum.workers import wire
from netsum.workers.cio import ENV as CIO_ENV
from netsum.workers.core import JobConfig, Timing
from netsum.workers.driver import MANY_ENV, Driver
from netsum.workers.native import ENV as NATIVE_ENV
from netsum.workers.native import native_status
from netsum.workers.shmring import ShmFrameTransport
from netsum.workers.transport import FrameTransport, UdpTransport

pytestmark = pytest.mark.skipif(not native_status()[0],
                                reason=f"no compiled worker core: {native_status()[1]}")

JOB, K, SLOTS = 5, 32, 8
SIZE = HEADER_BYTES + 4 * K
WINDOW = 300e-6               # traffic of this long is handed over per poll
TIMING = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.05, progress_deadline=5.0)
SERVICE = wire.Endpoint.parse("02:00:00:00:00:fe", "10.0.0.254", UDP_PORT)
WAYS = {"cio": {CIO_ENV: "1", NATIVE_ENV: "1"}, "pyio": {CIO_ENV: "0", NATIVE_ENV: "1"},
        "py": {CIO_ENV: "1", NATIVE_ENV: "0"}}
#: several cores on one driver: routed in C (CIo.cycle_many), or by the Python loop over the
#: C receive and sends (NETSUM_DRIVER_MANY=0)
MANY_WAYS = {**WAYS, "cio-route-py": {CIO_ENV: "1", NATIVE_ENV: "1", MANY_ENV: "0"}}
ENVS = {**MANY_WAYS, "default": {CIO_ENV: "", NATIVE_ENV: ""}}    # neither variable set


@contextmanager
def env(values: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def local(r: int) -> wire.Endpoint:
    return wire.Endpoint.parse(f"02:00:00:00:00:{r + 1:02x}", f"10.0.0.{r + 1}", UDP_PORT)


class Port:
    """The switch's side of one worker's transport: what the worker sent, in order, and a
    way to hand it frames (payloads wrapped as the transport's kind carries them)."""

    def __init__(self, kind: str, r: int, tmp: Path) -> None:
        self.kind, self.r = kind, r
        self.prefix = b"" if kind == "udp" else \
            wire.FramePrefix.build(SERVICE, local(r), SIZE).data
        if kind == "shm":
            self.server = ShmServer(str(tmp / f"p{r}"), Layout(512, 2048), r)
            got: list[Any] = []
            th = threading.Thread(target=lambda: got.append(ShmFrameTransport(
                str(tmp / f"p{r}"), local(r), SERVICE, k=K)), daemon=True)
            th.start()
            while th.is_alive():
                self.server.service()
                time.sleep(0.001)
            self.transport: Any = got[0]
            return
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.setblocking(False)
        if kind == "udp":
            self.transport = UdpTransport(self.sock.getsockname(), bind=("127.0.0.1", 0))
            self.transport.receive_into(0.0, SIZE)     # cuts the rows (and sets up the C I/O)
        else:
            self.transport = FrameTransport(self.sock.getsockname(), local(r), SERVICE,
                                            k=K)
        self.peer = self.transport.address

    def deliver(self, data: bytes, raw: bool = False) -> None:
        frame = data if raw else self.prefix + data
        if self.kind == "shm":
            assert self.server.tx.put([frame]) == 1
        else:
            self.sock.sendto(frame, self.peer)

    def sent(self) -> list[bytes]:
        """The worker's frames since the last call, payloads only (its prefix checked)."""
        out: list[bytes] = []
        if self.kind == "shm":
            self.server.rx.take(10_000, lambda v: out.append(bytes(v)))
        else:
            while True:
                try:
                    out.append(self.sock.recv(4096))
                except BlockingIOError:
                    break
        head = len(self.transport.frame_prefix)
        assert all(f[:head] == self.transport.frame_prefix for f in out)
        return [f[head:] for f in out]

    def close(self) -> None:
        self.transport.close()
        if self.kind == "shm":
            self.server.close()
        else:
            self.sock.close()


def hostile(kind: str, rng: np.random.Generator, r: int) -> tuple[bytes, bool]:
    """A datagram no worker should take (raw: not wrapped in the port's prefix)."""
    pick = int(rng.integers(0, 6))
    junk = rng.integers(0, 256, 3000, dtype=np.uint8).tobytes()
    if pick == 0:
        return b"", True
    if pick == 1:
        return junk[:7], True
    if pick == 2:                           # longer than a receive row
        return junk if kind != "shm" else junk[:2048], True
    if pick == 3:                           # the one valid length, garbage throughout
        return junk[:SIZE + (0 if kind == "udp" else 42)], True
    if pick == 4 and kind != "udp":         # a good frame for another worker's address
        other = wire.FramePrefix.build(SERVICE, local(r + 40), SIZE).data
        return other + junk[:SIZE], True
    return junk[:HEADER_BYTES], False       # a bare header of garbage


@dataclass
class Run:
    sent: dict[int, list[bytes]] = field(default_factory=dict)
    results: dict[Any, Any] = field(default_factory=dict)   # worker (or (worker, job) of lanes)
    counters: dict[int, tuple[int, ...]] = field(default_factory=dict)
    used_c: bool = False
    foreign: dict[int, int] = field(default_factory=dict)   # lanes: the drivers' count


def run_job(kind: str, way: str, tmp: Path, seed: int, n: int, length: int, loss: float,
            dup: float, reorder: float, junk: float, jobs: int = 1) -> Run:
    """`jobs` > 1: every worker runs that many jobs at once on one routing Driver (the
    training lanes' way: job ids JOB, JOB + 1, ..., each of its own tensor), and a copy of
    some results goes out under a job id nobody runs (foreign)."""
    rng = np.random.default_rng(seed)
    ids = [JOB + j for j in range(jobs)]
    xs = [(rng.standard_normal(length) * 100).astype(np.float32) for _ in range(n * jobs)]
    switch = OracleSwitch(k=K, members={j: list(range(n)) for j in ids},
                          num_slots={j: SLOTS for j in ids})
    up = LossyLink(rng, loss=loss, dup=dup, reorder=reorder)
    down = LossyLink(rng, loss=loss, dup=dup, reorder=reorder)
    vt = [0.0]
    clock: Callable[[], float] = lambda: vt[0]  # noqa: E731
    configs = [JobConfig(job_id=j, num_workers=n, num_slots=SLOTS, k=K) for j in ids]
    run = Run()
    ports: list[Port] = []
    events: list[tuple[float, int, bool, int, bytes, bool]] = []
    seq = [0]

    def push(at: float, to_switch: bool, r: int, payload: bytes, raw: bool = False) -> None:
        for t in (up if to_switch else down).arrivals(at, r):
            seq[0] += 1
            heapq.heappush(events, (t, seq[0], to_switch, r, payload, raw))

    def collect(r: int) -> None:
        for p in ports[r].sent():
            run.sent[r].append(p)
            push(vt[0], True, r, p)
    try:
        with env(ENVS[way]):
            ports = [Port(kind, r, tmp) for r in range(n)]
            drivers = [Driver(p.transport, clock, route=jobs > 1, quiet=ids) for p in ports]
            cores = [[d.core(xs[r * jobs + j], configs[j], TIMING) for j in range(jobs)]
                     for r, d in enumerate(drivers)]
        run.used_c = all(d._cio() is not None for d in drivers)
        for r, d in enumerate(drivers):
            run.sent[r] = []
            for c in cores[r]:
                d.start(c)
            collect(r)
        for _ in range(200_000):
            live = [r for r in range(n) if drivers[r].busy]
            if not live:
                break
            due = [dl for r in live for c in cores[r] if (dl := c.next_deadline()) is not None]
            t = min(([events[0][0]] if events else []) + due, default=np.inf)
            assert np.isfinite(t), "the job stalled"
            vt[0] = max(vt[0], t) + WINDOW
            dirty: set[int] = set()
            while events and events[0][0] <= vt[0]:
                at, _, to_switch, r, payload, raw = heapq.heappop(events)
                if to_switch:
                    for dst, out in switch.process(r, payload):
                        push(at, False, dst, out)
                        if jobs > 1 and rng.random() < junk:     # a job nobody runs
                            push(at, False, dst, out[:2] + bytes([0, 99]) + out[4:])
                    if rng.random() < junk:
                        bad, raw_bad = hostile(kind, rng, r)
                        push(at, False, r, bad, raw_bad)
                elif drivers[r].busy:
                    ports[r].deliver(payload, raw)
                    dirty.add(r)
            for r in live:
                dls = [dl for c in cores[r] if (dl := c.next_deadline()) is not None]
                if r in dirty or (dls and min(dls) <= vt[0]):
                    for done in drivers[r].poll(0.0):
                        assert done.error is None, done.error
                        key = r if jobs == 1 else (r, done.core._job_id)
                        run.results[key] = done.core.result()
                    collect(r)
        else:
            raise AssertionError("the job did not finish")
        for r, p in enumerate(ports):
            c = p.transport.counters
            run.counters[r] = (c.sent, c.received, c.malformed, c.foreign, c.send_dropped)
            run.foreign[r] = drivers[r].foreign
        for key, res in run.results.items():
            j = 0 if jobs == 1 else ids.index(key[1])
            assert check_result(res.tensor, reference([xs[r * jobs + j] for r in range(n)],
                                                      K)).ok
        assert len(run.results) == n * jobs
        return run
    finally:
        for p in ports:
            p.close()


CASES = [
    # kind, n, length, loss, dup, reorder, junk
    ("udp", 3, 2000, 0.05, 0.05, 0.1, 0.05),
    ("frames", 4, 3000, 0.1, 0.05, 0.1, 0.05),
    ("shm", 3, 2000, 0.1, 0.1, 0.2, 0.05),
    ("frames", 2, 300, 0.0, 0.0, 0.0, 0.0),
    ("shm", 4, 5000, 0.0, 0.0, 0.0, 0.1),
]


@pytest.mark.parametrize("kind, n, length, loss, dup, reorder, junk", CASES)
def test_c_loops_send_and_sum_what_the_python_loops_do(tmp_path: Path, kind: str, n: int,
                                                       length: int, loss: float, dup: float,
                                                       reorder: float, junk: float) -> None:
    seed = n * 100 + length
    runs = {}
    for way in WAYS:
        (tmp_path / way).mkdir()
        runs[way] = run_job(kind, way, tmp_path / way, seed, n, length, loss, dup, reorder,
                            junk)
    assert runs["cio"].used_c and not runs["pyio"].used_c and not runs["py"].used_c
    a = runs["cio"]
    for way in ("pyio", "py"):
        b = runs[way]
        for r in range(n):
            assert a.sent[r] == b.sent[r], f"worker {r} sent other frames ({way})"
            ra, rb = a.results[r], b.results[r]
            assert ra.tensor.tobytes() == rb.tensor.tobytes()
            assert ra.next_rounds == rb.next_rounds
            for f in ("packets_sent", "retransmissions", "results", "duplicates", "stale",
                      "rejected", "chunks", "fast_retransmissions", "spurious"):
                assert getattr(ra.stats, f) == getattr(rb.stats, f), (f, way)
            assert a.counters[r] == b.counters[r], (r, way)
    if junk:
        assert sum(res.stats.rejected for res in a.results.values()) + \
            sum(c[2] + c[3] for c in a.counters.values()), "no hostile datagram exercised"
    if loss:
        assert sum(res.stats.retransmissions for res in a.results.values())


LANE_CASES = [
    # kind, n, jobs, length, loss, dup, reorder, junk
    ("frames", 2, 4, 3000, 0.05, 0.05, 0.1, 0.05),
    ("udp", 3, 3, 2000, 0.1, 0.05, 0.1, 0.05),
    ("shm", 2, 4, 2500, 0.05, 0.1, 0.2, 0.05),
    ("frames", 2, 2, 500, 0.0, 0.0, 0.0, 0.0),
]


@pytest.mark.parametrize("kind, n, jobs, length, loss, dup, reorder, junk", LANE_CASES)
def test_several_cores_routed_in_c_send_and_sum_what_python_routing_does(
        tmp_path: Path, kind: str, n: int, jobs: int, length: int, loss: float, dup: float,
        reorder: float, junk: float) -> None:
    """The training lanes' case: several jobs at once on one driver per worker.  Routed by
    job id in C with every core's frames in one send (cycle_many), by the Python loop over
    the C receive (cio-route-py), over the Python loops and with the Python core: the same
    frames in the same order, the same sums, statistics, counters and foreign payloads."""
    seed = n * 1000 + jobs * 100 + length
    runs = {}
    for way in MANY_WAYS:
        (tmp_path / way).mkdir()
        runs[way] = run_job(kind, way, tmp_path / way, seed, n, length, loss, dup, reorder,
                            junk, jobs=jobs)
    a = runs["cio"]
    assert a.used_c
    for way, b in runs.items():
        for r in range(n):
            assert a.sent[r] == b.sent[r], f"worker {r} sent other frames ({way})"
            assert a.counters[r] == b.counters[r], (r, way)
            assert a.foreign[r] == b.foreign[r], (r, way)
        for key, ra in a.results.items():
            rb = b.results[key]
            assert ra.tensor.tobytes() == rb.tensor.tobytes()
            for f in ("packets_sent", "retransmissions", "results", "duplicates", "stale",
                      "rejected", "chunks", "fast_retransmissions", "spurious"):
                assert getattr(ra.stats, f) == getattr(rb.stats, f), (f, way, key)
    if junk:
        assert sum(a.foreign.values()), "no payload of another job exercised"


@pytest.mark.parametrize("kind", ["udp", "frames", "shm"])
def test_without_a_compiler_the_loops_stay_in_python(tmp_path: Path, kind: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """No compiled module (the container has no C compiler): no transport sets up the C loops,
    the job runs on the Python core and sends what the compiled path sends."""
    (tmp_path / "c").mkdir()
    (tmp_path / "none").mkdir()
    with_c = run_job(kind, "default", tmp_path / "c", 7, 3, 1500, 0.05, 0.05, 0.1, 0.05)
    import netsum.workers.native as native
    monkeypatch.setattr(native, "_module", None)
    monkeypatch.setattr(native, "_why", "no C compiler (cc/gcc, or $CC) on PATH")
    monkeypatch.setattr(native, "_said", ["said"])
    without = run_job(kind, "default", tmp_path / "none", 7, 3, 1500, 0.05, 0.05, 0.1, 0.05)
    assert with_c.used_c and not without.used_c
    assert without.sent == with_c.sent
    assert without.counters == with_c.counters


# -- the rings' hostile descriptors --------------------------------------------------------

def _ring_words(server: ShmServer) -> memoryview:
    return server.view.cast("I")


@pytest.mark.parametrize("way", ["cio", "pyio"])
def test_bad_descriptors_and_heads_are_counted_not_followed(tmp_path: Path,
                                                            way: str) -> None:
    """Descriptors outside the ring's buffers are skipped and counted, an impossible head is
    counted and the ring resynchronised; the good frames around them arrive in order."""
    with env(WAYS[way]):
        port = Port("shm", 0, tmp_path)
    try:
        t = port.transport
        assert (t.cio is not None) == (way == "cio")
        lay = port.server.layout
        good = [port.prefix + wire.encode(
            wire.Header(msg_type=MsgType.RESULT, flags=Flags.NONE, job_id=JOB, slot=i, exp=0,
                        count=2, round=i, offset=0, workers=2),
            np.full(K, i, np.int32), K) for i in range(6)]
        w = _ring_words(port.server)
        d = lay.desc(TO_PEER) // 4
        for i, f in enumerate(good):
            assert port.server.tx.put([f]) == 1
            if i in (1, 3):                 # point this one outside the ring's buffers
                slot = (w[lay.ctrl(TO_PEER) // 4 + HEAD // 4] - 1) & (lay.slots - 1)
                w[d + 2 * slot] = 0 if i == 1 else lay.size - 8
                w[d + 2 * slot + 1] = SIZE + 42
        n = t.receive_into(0.0, SIZE)
        assert [bytes(p) for p in t.rx_payloads[:n]] == \
            [f[42:] for i, f in enumerate(good) if i not in (1, 3)]
        assert t.counters.malformed == 2 and t.counters.received == 6
        # a head far beyond the tail: counted, what it claimed dropped, the ring usable again
        h = lay.ctrl(TO_PEER) // 4 + HEAD // 4
        w[h] = (w[h] + lay.slots * 3) & 0xFFFFFFFF
        assert t.receive_into(0.0, SIZE) == 0
        assert t.counters.malformed == 3
        assert port.server.tx.put([good[0]]) == 1
        assert t.receive_into(0.0, SIZE) == 1 and bytes(t.rx_payloads[0]) == good[0][42:]
        del w
        assert DESC == 8
    finally:
        port.close()


@pytest.mark.parametrize("kind", ["udp", "shm"])
def test_a_check_that_raises_leaves_the_loop_usable(tmp_path: Path, kind: str) -> None:
    """The Python check of a datagram C declined raises (a signal, a bug): the error comes
    out, and the next receive starts a fresh batch (no stale state, no error of its own)."""
    with env(WAYS["cio"]):
        port = Port("frames" if kind == "udp" else "shm", 0, tmp_path)
    try:
        t = port.transport
        assert t.cio is not None
        good = port.prefix + wire.encode(
            wire.Header(msg_type=MsgType.RESULT, flags=Flags.NONE, job_id=JOB, slot=1, exp=0,
                        count=2, round=1, offset=0, workers=2), np.ones(K, np.int32), K)
        port.deliver(b"short", raw=True)

        def boom(j: int, length: int) -> bool:
            raise KeyboardInterrupt
        with pytest.raises(KeyboardInterrupt):
            t._sock.recv_rows(t._rx.rows, 0.0, boom)
        port.deliver(good, raw=True)
        got = []
        for _ in range(3):
            n = t.receive_into(0.0, SIZE)
            got += [bytes(p) for p in t.rx_payloads[:n]]
        assert got[-1:] == [good[42:]]
    finally:
        port.close()
