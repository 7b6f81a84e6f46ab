"""UDP GSO/GRO in the worker's C I/O (workers/wgso.c, wio.c, cio.py, netsum/udpgso.py).

test_cio.py's differential job (real Drivers over real UDP transports, tests/oracle.py as
the switch behind lossy links, hostile datagrams mixed in) with the switch's side sending
the way netsum-switch's C loop does: what reaches a worker between two of its polls leaves
as GSO sends, runs of one length grouped by udpgso.plan_groups (so a hostile datagram
shorter than the results before it is often a coalesced buffer's short last segment, an
empty or longer one a send of its own).  The worker's socket has UDP_GRO on and C splits
every buffer into rows; its sends are GSO too.  Every worker must send the same frames in
the same order, end with the same sums, statistics and transport counters as the Python
loops fed the same datagrams one by one -- and coalesced buffers must really have been read.
"""
from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Any

import pytest
import test_cio
from test_cio import WAYS, run_job

from netsum import udpgso
from netsum.workers.driver import Driver
from netsum.workers.native import native_status

pytestmark = pytest.mark.skipif(not native_status()[0],
                                reason=f"no compiled worker core: {native_status()[1]}")


def _gso_send(sock: socket.socket, frames: list[bytes], dest: tuple[str, int]) -> None:
    if len(frames) == 1 or not frames[0]:
        for f in frames:
            sock.sendto(f, dest)
        return
    cm = [(udpgso.SOL_UDP, udpgso.UDP_SEGMENT, struct.pack("=H", len(frames[0])))]
    sock.sendmsg(frames, cm, 0, dest)


class Coalescing:
    """Port.deliver holds frames back; Driver.poll first sends what its port holds, grouped
    into GSO sends.  Counts the GRO reads the workers' C loops report."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pending: dict[int, tuple[Any, list[bytes]]] = {}
        self.sends = 0
        self.stats: dict[str, int] = {}
        self.gro_on: list[bool] = []
        poll = Driver.poll
        outer = self

        def deliver(port: Any, data: bytes, raw: bool = False) -> None:
            frame = data if raw else port.prefix + data
            outer.pending.setdefault(id(port.transport), (port, []))[1].append(frame)

        def poll_first(drv: Driver, timeout: float) -> Any:
            held = outer.pending.pop(id(drv._transport), None)
            if held is not None:
                port, frames = held
                for a, n in udpgso.plan_groups([len(f) for f in frames]):
                    _gso_send(port.sock, frames[a:a + n], port.peer)
                    outer.sends += n > 1 and len(frames[a]) > 0
            out = poll(drv, timeout)
            cio = drv._transport.cio
            if cio is not None:
                outer.gro_on.append(cio.gro)
                for k, v in cio.gso_stats().items():
                    outer.stats[k] = outer.stats.get(k, 0) + v
            return out
        monkeypatch.setattr(test_cio.Port, "deliver", deliver)
        monkeypatch.setattr(Driver, "poll", poll_first)


CASES = [
    # kind, n, length, loss, dup, reorder, junk
    ("frames", 3, 3000, 0.05, 0.05, 0.1, 0.1),
    ("udp", 3, 2000, 0.05, 0.05, 0.1, 0.1),
    ("frames", 2, 4000, 0.0, 0.0, 0.0, 0.0),
]


@pytest.mark.parametrize("kind, n, length, loss, dup, reorder, junk", CASES)
def test_coalesced_deliveries_give_what_one_by_one_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, n: int, length: int,
        loss: float, dup: float, reorder: float, junk: float) -> None:
    seed = n * 100 + length
    (tmp_path / "pyio").mkdir()
    ref = run_job(kind, "pyio", tmp_path / "pyio", seed, n, length, loss, dup, reorder, junk)
    monkeypatch.setenv(udpgso.ENV, "1")
    co = Coalescing(monkeypatch)
    (tmp_path / "cio").mkdir()
    got = run_job(kind, "cio", tmp_path / "cio", seed, n, length, loss, dup, reorder, junk)
    assert got.used_c and not ref.used_c and WAYS["cio"]
    assert co.gro_on and all(co.gro_on)
    for r in range(n):
        assert got.sent[r] == ref.sent[r], f"worker {r} sent other frames"
        a, b = got.results[r], ref.results[r]
        assert a.tensor.tobytes() == b.tensor.tobytes()
        for f in ("packets_sent", "retransmissions", "results", "duplicates", "stale",
                  "rejected", "chunks"):
            assert getattr(a.stats, f) == getattr(b.stats, f), f
        assert got.counters[r] == ref.counters[r], r
    # the switch's side really coalesced, the workers really read coalesced buffers and sent
    # GSO sends (their datagrams: the frames the oracle got one by one above)
    assert co.sends > 10 and co.stats["rx_buffers"] >= co.sends
    assert co.stats["rx_segments"] > 2 * co.stats["rx_buffers"]
    assert co.stats["tx_sends"] > 0 and co.stats["refused"] == 0 and co.stats["cut"] == 0
    if junk:
        assert sum(res.stats.rejected for res in got.results.values()) + \
            sum(c[2] + c[3] for c in got.counters.values()), "no hostile datagram"


def test_a_refused_gso_send_leaves_one_by_one(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel refuses GSO on a socket without UDP checksums (SO_NO_CHECK: EINVAL): every
    worker must still send exactly the frames of the Python loops, GSO off after the first."""
    kind, n, length, loss, dup, reorder, junk = CASES[0]
    seed = n * 100 + length
    (tmp_path / "pyio").mkdir()
    ref = run_job(kind, "pyio", tmp_path / "pyio", seed, n, length, loss, dup, reorder, junk)
    monkeypatch.setenv(udpgso.ENV, "1")
    co = Coalescing(monkeypatch)
    init = test_cio.Port.__init__

    def no_check(port: Any, *args: Any) -> None:
        init(port, *args)
        port.transport._sock._sock.setsockopt(socket.SOL_SOCKET, 11, 1)   # SO_NO_CHECK
    monkeypatch.setattr(test_cio.Port, "__init__", no_check)
    (tmp_path / "cio").mkdir()
    got = run_job(kind, "cio", tmp_path / "cio", seed, n, length, loss, dup, reorder, junk)
    for r in range(n):
        assert got.sent[r] == ref.sent[r], f"worker {r} sent other frames"
        assert got.counters[r] == ref.counters[r], r
    assert co.stats["refused"] == n and co.stats["tx_sends"] == 0
    assert co.stats["rx_buffers"] > 0                # receiving coalesced is unaffected


def test_gso_sends_only_to_a_loopback_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    from netsum.workers.transport import FrameTransport
    monkeypatch.setenv(udpgso.ENV, "1")
    for dest, tx in ((("127.0.0.1", 9), 1), (("192.0.2.7", 9), 0)):
        t = FrameTransport(dest, test_cio.local(0), test_cio.SERVICE, k=test_cio.K)
        try:
            assert t.cio is not None and t.cio.gro
            got = t.cio.gso_stats()
            assert (got["tx_on"], got["rx_on"]) == (tx, 1), dest
        finally:
            t.close()
    monkeypatch.setenv(udpgso.ENV, "0")
    t = FrameTransport(("127.0.0.1", 9), test_cio.local(0), test_cio.SERVICE, k=test_cio.K)
    try:
        assert t.cio is not None and not t.cio.gro
        assert t.cio.gso_stats()["tx_on"] == 0
    finally:
        t.close()
