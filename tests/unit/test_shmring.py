"""The shared-memory ring format and its Python endpoints (netsum/shmring.py), in-process:
layout invariants, frames through both rings with wrap-around, the doorbell handshake that
wakes a sleeping consumer, and a peer's attach/claim over the port's socket."""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from netsum.shmring import (DESC, HEAD, TAIL, TO_PEER, TO_SWITCH, WAKE, Layout, ShmError,
                            ShmPeer, ShmServer, attach)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[ShmServer, ShmPeer]]:
    """A switch-side server and an attached peer in this process (the server's control
    socket is serviced here until the peer has its rings)."""
    server = ShmServer(str(tmp_path / "p"), Layout(16, 128), 5)
    got: list[ShmPeer] = []
    t = threading.Thread(target=lambda: got.append(attach(str(tmp_path / "p"))), daemon=True)
    t.start()
    while t.is_alive():
        server.service()
        time.sleep(0.001)
    assert got, "attach failed"
    try:
        yield server, got[0]
    finally:
        got[0].close()
        server.close()


@pytest.mark.parametrize("slots, frame", [(2, 64), (16, 128), (512, 2048), (1024, 9216)])
def test_layout_regions_are_aligned_disjoint_and_inside(slots: int, frame: int) -> None:
    lay = Layout(slots, frame)
    parts = [(0, len(lay.header()))]
    for r in (TO_SWITCH, TO_PEER):
        parts += [(lay.ctrl(r) + f, lay.ctrl(r) + f + 4) for f in (HEAD, TAIL, WAKE)]
        parts += [(lay.desc(r), lay.desc(r) + slots * DESC),
                  (lay.buffers(r), lay.buffers(r) + slots * frame)]
    parts.sort()
    for (a0, a1), (b0, b1) in zip(parts, parts[1:]):
        assert a1 <= b0, (a0, a1, b0, b1)
    assert parts[-1][1] == lay.size
    # head, tail and wake of one ring on cache lines of their own (no false sharing)
    assert len({(lay.ctrl(r) + f) // 64 for r in (0, 1) for f in (HEAD, TAIL, WAKE)}) == 6
    assert all(lay.buffers(r) % 64 == 0 and lay.desc(r) % 64 == 0 for r in (0, 1))


def test_frames_cross_both_rings_in_order_with_wrap_around(
        pair: tuple[ShmServer, ShmPeer]) -> None:
    server, peer = pair
    rng = random.Random(5)
    for tx, rx in ((peer.tx, server.rx), (server.tx, peer.rx)):
        sent: list[bytes] = []
        got: list[bytes] = []
        for _ in range(40):                         # 16 slots: wraps around many times
            batch = [rng.randbytes(rng.randrange(0, 129)) for _ in range(rng.randrange(1, 12))]
            at = 0
            while at < len(batch):
                n = tx.put(batch, None, at)
                sent += batch[at:at + n]
                at += n
                rx.take(rng.randrange(1, 20), lambda v: got.append(bytes(v)))
        while rx.take(100, lambda v: got.append(bytes(v))):
            pass
        assert got == sent and len(sent) > 200
        assert rx.bad_desc == rx.bad_index == tx.bad_index == 0


def test_a_frame_longer_than_a_buffer_stops_the_batch_before_it(
        pair: tuple[ShmServer, ShmPeer]) -> None:
    _server, peer = pair
    frames = [b"a" * 10, b"b" * 129, b"c" * 10]
    assert peer.tx.put(frames) == 1 and not peer.tx.fits(frames[1])
    assert peer.tx.put(frames, [2, 0], 0) == 2       # in the given order


def _in_select(tid: int | None) -> bool:
    """Is thread `tid` of this process blocked in select/poll (Linux x86-64 syscall numbers;
    elsewhere: True once the thread has had a moment)?"""
    try:
        nr = Path(f"/proc/self/task/{tid}/syscall").read_text().split()[0]
    except (OSError, IndexError):
        time.sleep(0.2)
        return True
    return nr in ("7", "23", "270", "271")            # poll, select, pselect6, ppoll


@pytest.mark.parametrize("direction", ["to the peer", "to the switch"])
def test_a_sleeping_consumer_is_woken_by_the_doorbell(pair: tuple[ShmServer, ShmPeer],
                                                      direction: str) -> None:
    """The consumer sleeps (no spin) with a 20 s timeout; the producer puts one frame once it
    is armed.  Without the doorbell it would sleep the whole 20 s."""
    server, peer = pair
    tx, rx = (server.tx, peer.rx) if direction == "to the peer" else (peer.tx, server.rx)
    out: list[tuple[bool, float]] = []

    def sleeper() -> None:
        t0 = time.monotonic()
        out.append((rx.wait(20.0, spin=0.0), time.monotonic() - t0))
    t = threading.Thread(target=sleeper, daemon=True)
    t.start()
    words = (peer.view if rx is peer.rx else server.view).cast("I")
    wake = (peer.layout.ctrl(TO_PEER if rx is peer.rx else TO_SWITCH) + WAKE) // 4
    deadline = time.monotonic() + 10
    # Armed and inside select(): a frame put earlier is seen by the look after arming.
    while not (words[wake] and _in_select(t.native_id)):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    del words
    assert tx.put([b"x" * 60]) == 1
    t.join(25)
    assert out and out[0][0], out
    assert out[0][1] < 10.0, f"woken only by the timeout ({out[0][1]:.1f} s)"


def test_the_port_takes_one_peer_at_a_time(pair: tuple[ShmServer, ShmPeer],
                                           tmp_path: Path) -> None:
    server, peer = pair
    err: list[BaseException] = []

    def second() -> None:
        try:
            attach(str(tmp_path / "p")).close()
        except ShmError as exc:
            err.append(exc)
    t = threading.Thread(target=second, daemon=True)
    t.start()
    while t.is_alive():
        server.service()
        time.sleep(0.001)
    assert err and "taken by another peer" in str(err[0]) and f"pid=" in str(err[0])
    assert server.conn is not None                   # the first one keeps it


def test_without_libatomic_both_sides_refuse_at_once(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """No fence (no libatomic.so.1): the switch's port and the worker's attach each raise one
    clear ShmError before anything is mapped -- never a port that dies later in the loop."""
    import netsum.shmring as shmring
    monkeypatch.setattr(shmring, "_FENCE", None)
    path = str(tmp_path / "p.sock")
    for make in (lambda: ShmServer(path, Layout(slots=8, frame=2048), 1),
                 lambda: shmring.attach(path)):
        with pytest.raises(ShmError, match=r"libatomic\.so\.1 \(Debian: libatomic1\)"):
            make()
    assert not Path(path).exists()
