"""The batched system calls of the worker's sockets (workers/mmsg.py: recvmmsg/sendmmsg through
ctypes) over real sockets on 127.0.0.1, and the portable path they replace (NETSUM_MMSG=0),
against plain sockets written here.  Expectations are the datagrams this test sends: which
arrive where, in which order, cut where, with which lengths."""
from __future__ import annotations

import socket
from collections.abc import Iterator

import numpy as np
import pytest

from netsum.wire import HEADER_BYTES
from netsum.workers import UdpTransport, cio, mmsg

ROW = 2048     # workers/transport.py's receive row
BATCHED = mmsg.unavailable_reason() is None


@pytest.fixture(params=["c", "batched", "portable"])
def path(request: pytest.FixtureRequest,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """c: the receive loop in C (workers/cio.py); batched: recvmmsg/sendmmsg through ctypes
    (NETSUM_WORKER_CIO=0); portable: recv_into/sendto."""
    if request.param != "portable" and not BATCHED:
        pytest.skip(f"recvmmsg/sendmmsg unavailable: {mmsg.unavailable_reason()}")
    if request.param == "c" and not cio.enabled():
        pytest.skip("no compiled worker module")
    monkeypatch.setenv(cio.ENV, "1" if request.param == "c" else "0")
    mmsg.enable(request.param != "portable")
    try:
        yield request.param
    finally:
        mmsg.enable(BATCHED)


def plain_socket() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(2.0)
    return s


def drain(t: UdpTransport, size: int, want: int) -> tuple[list[bytes], list[bytes]]:
    """What receive_into delivers (copied at once: the rows are reused) until `want`
    datagrams were read."""
    good: list[bytes] = []
    for _ in range(200):
        n = t.receive_into(0.2, size)
        good += [bytes(p) for p in t.rx_payloads[:n]]
        if t.counters.received >= want:
            break
    other = list(t.rx_other)
    t.rx_other.clear()
    return good, other


def test_receive_into_sorts_a_mixed_batch(path: str) -> None:
    """Exact-size datagrams land in rows 0..n-1 in arrival order; a short one and one longer
    than a row go to rx_other (the long one with its own length) and leave no gap."""
    size = HEADER_BYTES + 4 * 256
    rng = np.random.default_rng(3)
    sent = [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for _ in range(40)]
    short, long_ = b"tiny", rng.integers(0, 256, ROW + 900, dtype=np.uint8).tobytes()
    order = sent[:5] + [short] + sent[5:20] + [long_] + sent[20:]
    tx = plain_socket()
    with UdpTransport(tx.getsockname(), bind=("127.0.0.1", 0)) as t:
        t.receive_into(0.0, size)              # sets up the rows (and the batched calls)
        assert t.syscalls.startswith("recv_into" if path == "portable" else "recvmmsg")
        assert (t.cio is not None) == (path == "c")
        for d in order:
            tx.sendto(d, t.address)
        good, other = drain(t, size, len(order))
        assert good == sent
        assert other[0] == short
        assert len(other[1]) == len(long_) and other[1][:ROW] == long_[:ROW]
        assert t.counters.received == len(order)
    tx.close()


def test_send_frames_keeps_order_and_sends_copies_alone(path: str) -> None:
    """Rows of one buffer go out as they are, in the order asked (a read-only copy among
    them, as the core's spill makes, in its place), more than one batch's worth too."""
    w, size = 300, 96
    buf = bytearray(w * size)
    for i in range(w):
        buf[i * size:(i + 1) * size] = bytes([i % 251]) * size
    mv = memoryview(buf)
    frames = [mv[i * size:(i + 1) * size] for i in range(w)]
    copy = bytes(b"\xEE" * size)
    frames.append(memoryview(copy))          # index w: a copy in bytes (read-only)
    rx = plain_socket()
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    slots = [3, 0, w, 1, 2] + list(range(4, w))
    with UdpTransport(rx.getsockname(), bind=("127.0.0.1", 0)) as t:
        t.receive_into(0.0, size)
        t.send_frames(frames, slots)
        t.send_frames(frames, [7, w, 8])       # the same frames list again (cached addresses)
        got = [rx.recv(4096) for _ in range(len(slots) + 3)]
        assert t.counters.sent == len(slots) + 3
    rx.close()
    assert got == [bytes(frames[i]) for i in slots + [7, w, 8]]


def test_send_frames_from_several_windows_in_turn(path: str) -> None:
    """The training lanes send from one window per busy lane in turn: each frame goes out from
    its own window's rows, also after other windows were sent from, and after a window's list
    was given new rows in place (as NativeCore._grow does) -- never an older list's bytes."""
    size = 64

    def window(tag: int, rows: int) -> list[memoryview]:
        buf = bytearray(rows * size)
        for i in range(rows):
            buf[i * size:(i + 1) * size] = bytes([tag, i]) * (size // 2)
        mv = memoryview(buf)
        return [mv[i * size:(i + 1) * size] for i in range(rows)]
    lists = [window(tag, 6) for tag in range(12)]      # more windows than are remembered
    order = [0, 1, 2, 0, 2, 1, *range(3, 12), 0, 1, 2, 0]
    rx = plain_socket()
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    want: list[bytes] = []
    with UdpTransport(rx.getsockname(), bind=("127.0.0.1", 0)) as t:
        t.receive_into(0.0, size)
        for n, j in enumerate(order):
            if n == len(order) - 1:
                lists[0][:] = window(99, 8)            # new rows in the same list object
            slots = [n % 6, (n + 1) % 6]
            t.send_frames(lists[j], slots)
            want += [bytes(lists[j][i]) for i in slots]
        got = [rx.recv(4096) for _ in range(len(want))]
    rx.close()
    assert got == want


def test_portable_path_is_used_when_turned_off() -> None:
    mmsg.enable(False)
    try:
        assert mmsg.unavailable_reason() is not None
        with UdpTransport(("127.0.0.1", 9), bind=("127.0.0.1", 0)) as t:
            t.receive_into(0.0, 64)
            assert t.syscalls.startswith("recv_into/sendto (")
    finally:
        mmsg.enable(BATCHED)
