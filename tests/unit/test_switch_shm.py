"""Shared-memory ports (`-i N@shm:PATH`, netsum/shmring.py) against UDP-tunnel ports.

Differential: the frame sequences of test_switch_ioloop.py (netsum.p4 with members, a
non-member, an unknown job, stale rounds, results, cut and corrupted frames, bursts, table and
group writes while the loop runs; the router with a CPU port and a port without a peer) go
through shared-memory ports with the C port loop and with the Python loop, and through UDP
ports with the C loop: every port must see the same frames in the same order, with the same
statistics (but for `udp_foreign`: a ring has no foreign sender, so those frames are not
sent) and register cells.

Hostile peers, through both loops: descriptors outside the ring's buffers, a head beyond
the ring, an impossible tail on the switch's ring, a peer that never reads, a peer killed
mid-stream, a second peer while one is attached, a peer trying to shrink the region: each
is counted or refused, nothing else changes, and the next good frame is forwarded.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
import pytest

from portloop import looped
from netsum.shmring import (HEAD, TAIL, TO_PEER, TO_SWITCH, Layout, ShmError, ShmPeer, attach)
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Lpm, TableEntry
from netsum.switch.native import build
from netsum.switch.pipeline import Pipeline
from netsum.switch.ports import PortKind, parse_port_spec
from test_switch_ioloop import ROUTER_JSON, _netsum_run, _router_run

WHY = build.available()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"native backend not buildable: {WHY}")
ONLY_UDP = ("udp_foreign",)


def _same_but_transport(a: dict[str, int], b: dict[str, int]) -> None:
    assert {k: v for k, v in a.items() if k not in ONLY_UDP} == \
        {k: v for k, v in b.items() if k not in ONLY_UDP}


@pytest.mark.slow
@pytest.mark.parametrize("k", [32, 256])
def test_netsum_p4_over_shm_ports_matches_udp_ports_in_both_loops(k: int,
                                                                  tmp_path: Path) -> None:
    udp = _netsum_run(k, "c", k)
    c = _netsum_run(k, "c", k, str(tmp_path))
    py = _netsum_run(k, "python", k, str(tmp_path))
    for port in udp[0]:
        assert c[0][port] == udp[0][port], port
        assert py[0][port] == udp[0][port], port
    _same_but_transport(c[1], udp[1])
    _same_but_transport(py[1], udp[1])
    assert c[2] == udp[2] and py[2] == udp[2]
    assert sum(len(v) for v in c[0].values()) > 100
    assert c[1]["parser_errors"] > 5 and c[1]["dropped"] > 20
    assert c[1]["shm_bad_desc"] == c[1]["shm_bad_index"] == c[1]["shm_tx_full"] == 0


def test_router_over_shm_ports_matches_udp_ports_in_both_loops(tmp_path: Path) -> None:
    udp = _router_run("c")
    c, py = _router_run("c", str(tmp_path)), _router_run("python", str(tmp_path))
    assert c[0] == udp[0] and py[0] == udp[0]
    assert c[2] == udp[2] and py[2] == udp[2] and len(c[2]) > 10       # packet-ins, in order
    _same_but_transport(c[1], udp[1])
    _same_but_transport(py[1], udp[1])
    assert c[1]["no_tx_port"] > 10 and c[1]["dropped"] > 0


# -- hostile peers ---------------------------------------------------------------------------
def _router() -> Device:
    dev = Device(seed=1)
    dev.install(Pipeline(json.loads(ROUTER_JSON.read_text()), native=True))
    assert dev.pipeline is not None
    t = dev.pipeline.tables["MyIngress.ipv4_lpm"]
    for addr, port in ((0x0A010000, 1), (0x0A020000, 2)):
        t.insert(TableEntry((Lpm(addr, 16),), ActionCall("MyIngress.ipv4_forward",
                                                        (0x020000000000 + port, port))))
    return dev


def _frame(dst_port: int, n: int) -> bytes:
    """An IPv4 frame the router sends out of `dst_port`; `n` tells frames apart."""
    return bytes.fromhex("0200000000fe" "020000000002" "0800" "4500002e00004000" "4011") + \
        bytes(2) + struct.pack(">II", 0x0A000002, 0x0A000001 + (dst_port << 16)) + \
        n.to_bytes(4, "big") + bytes(22)


def _routed(frame: bytes, port: int) -> bytes:
    """What the router makes of `frame` on `port`: new MACs, TTL - 1, IPv4 checksum anew
    (RFC 1071)."""
    ip = bytearray(frame[14:34])
    ip[8] -= 1
    ip[10:12] = b"\0\0"
    total = sum(struct.unpack("!10H", ip))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    ip[10:12] = struct.pack("!H", ~total & 0xFFFF)
    return (0x020000000000 + port).to_bytes(6, "big") + frame[:6] + frame[12:14] + \
        bytes(ip) + frame[34:]


def _words(peer: ShmPeer) -> memoryview:
    return peer.view.cast("I")


def _raw_put(peer: ShmPeer, off: int, length: int, head_step: int = 1) -> None:
    """Write descriptor (off, length) at ring 0's head and move head by `head_step`, as a
    peer that ignores the rules may."""
    lay, w = peer.layout, _words(peer)
    h = (lay.ctrl(TO_SWITCH) + HEAD) // 4
    head = w[h]
    i = head & (lay.slots - 1)
    d = lay.desc(TO_SWITCH) // 4
    w[d + 2 * i] = off & 0xFFFFFFFF
    w[d + 2 * i + 1] = length & 0xFFFFFFFF
    w[h] = (head + head_step) & 0xFFFFFFFF
    peer.tx.notify()


def _until(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


def _received(peer: ShmPeer, out: list[bytes]) -> None:
    peer.rx.take(1 << 20, lambda v: out.append(bytes(v)))


@pytest.mark.parametrize("io", ["c", "python"])
def test_bad_descriptors_and_indices_are_counted_and_nothing_else_changes(
        io: str, tmp_path: Path) -> None:
    dev = _router()
    with looped(dev, [1, 2], io, shm_dir=str(tmp_path)) as lp:
        p1, p2 = lp.rings[1], lp.rings[2]
        lay = p1.layout
        lo = lay.buffers(TO_SWITCH)
        hi = lo + lay.slots * lay.frame
        good = _frame(2, 1)
        # A frame anywhere inside the ring's buffers is fine (memif: the producer chooses).
        p1.view[lo + 5 * lay.frame + 3:lo + 5 * lay.frame + 3 + len(good)] = good
        bad = [(0, 60), (lay.ctrl(TO_PEER), 8), (lay.buffers(TO_PEER), 60), (hi - 10, 60),
               (0xFFFFFFF0, 0x20), (lo, 0xFFFFFFFF), (hi, 1)]
        for off, length in bad:
            _raw_put(p1, off, length)
        _raw_put(p1, lo + 5 * lay.frame + 3, len(good))
        _until(lambda: dev.stats.rx_packets == 1 and dev.stats.shm_bad_desc == len(bad),
               "bad descriptors counted, the good one taken")
        got: list[bytes] = []
        _until(lambda: (_received(p2, got), got)[1] != [], "the good frame forwarded")
        assert got == [_routed(good, 2)]
        # A head more than a ring ahead: counted, the ring resynchronised (nothing taken).
        _raw_put(p1, lo, 60, head_step=lay.slots + 7)
        _until(lambda: dev.stats.shm_bad_index == 1, "impossible head counted")
        # An impossible tail on the switch's ring to port 2: counted when the switch next
        # writes there, and the ring starts over (port 2 then gets the frame).  Port 2's peer
        # must not read before (its own take() would resynchronise the ring first).
        lp.muted.add(2)
        w2 = _words(p2)
        c2 = p2.layout.ctrl(TO_PEER)
        w2[(c2 + TAIL) // 4] = (w2[(c2 + HEAD) // 4] + 5) & 0xFFFFFFFF
        del w2
        lp.burst([(1, _frame(2, 2), False)])
        _until(lambda: dev.stats.shm_bad_index == 2, "impossible tail counted")
        lp.muted.clear()
        _until(lambda: (lp.burst([]), lp.out[2])[1] != [], "forwarded after the resync")
        assert lp.out[2] == [_routed(_frame(2, 2), 2)]
        st = dev.stats.as_dict()
    assert st["rx_packets"] == 2 and st["tx_packets"] == 2
    assert st["shm_bad_desc"] == len(bad) and st["shm_bad_index"] == 2
    assert st["internal_errors"] == st["parser_errors"] == st["tx_errors"] == 0


@pytest.mark.parametrize("io", ["c", "python"])
def test_a_peer_that_never_reads_fills_its_ring_and_the_rest_is_counted(
        io: str, tmp_path: Path) -> None:
    dev = _router()
    with looped(dev, [1, 2], io, shm_dir=str(tmp_path)) as lp:
        slots = lp.rings[2].layout.slots
        frames = [(1, _frame(2, n), False) for n in range(slots + 40)]
        lp.muted.add(2)                              # port 2's peer reads nothing meanwhile
        for at in range(0, len(frames), 64):
            lp.burst(frames[at:at + 64])
        _until(lambda: dev.stats.shm_tx_full == 40, "the 40 frames beyond the ring counted")
        lp.muted.clear()
        lp.burst([])                                 # reads port 2's ring
        assert lp.out[2] == [_routed(f, 2) for _, f, _ in frames[:slots]]   # the first, whole
        lp.burst([(1, _frame(2, 99999), False)])     # room again
        _until(lambda: (lp.burst([]), len(lp.out[2]))[1] == slots + 1, "room again")
        assert lp.out[2][-1] == _routed(_frame(2, 99999), 2)
    assert dev.stats.shm_tx_full == 40 and dev.stats.internal_errors == 0


_CHILD = """
import sys, time
from netsum.shmring import attach
peer = attach(sys.argv[1])
print("attached", flush=True)
frame = bytes.fromhex(sys.argv[2])
while True:                     # as fast as it can, until killed
    peer.tx.put([frame] * 16)
"""


@pytest.mark.parametrize("io", ["c", "python"])
def test_a_killed_peer_frees_its_port_and_a_second_peer_is_refused(
        io: str, tmp_path: Path) -> None:
    dev = _router()
    with looped(dev, [1, 2], io, shm_dir=str(tmp_path)) as lp:
        path = str(tmp_path / "p1")
        lp.rings[1].close()                     # the test's own peer of port 1 leaves
        del lp.rings[1]
        # The child's frames go back out of port 1 (its own ring, which it never reads).
        child = subprocess.Popen([sys.executable, "-c", _CHILD, path, _frame(1, 7).hex()],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "attached"
            with pytest.raises(ShmError, match="taken by another peer"):
                attach(path)
            _until(lambda: dev.stats.rx_packets > 1000, "the child's frames flow")
            child.send_signal(signal.SIGKILL)      # mid-stream, possibly mid-batch
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
        lp.rings[1] = attach(path)                 # the port is free again
        lp.taken = dev.stats.rx_packets
        lp.burst([(1, _frame(2, 8), False)])       # (the dead child's last frames may come
        _until(lambda: (lp.burst([]), lp.out[2])[1] != [], "forwarded")   # first)
        assert lp.out[2] == [_routed(_frame(2, 8), 2)]
        assert dev.stats.shm_tx_full > 0           # port 1's ring, full of the child's
    st = dev.stats
    assert st.internal_errors == 0 and st.shm_bad_desc == 0 and st.shm_bad_index == 0


def test_the_region_cannot_be_shrunk_by_a_peer(tmp_path: Path) -> None:
    """A peer that truncated the region would make the switch's next access fault (SIGBUS):
    the memfd is sealed."""
    dev = _router()
    with looped(dev, [1], "c", shm_dir=str(tmp_path)) as lp:
        lp.rings[1].close()
        del lp.rings[1]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(str(tmp_path / "p1"))
        msg, fds, _f, _a = socket.recv_fds(s, 512, 4)
        try:
            assert msg.startswith(b"NSUMRING 1 ") and len(fds) == 3
            with pytest.raises(PermissionError):
                os.ftruncate(fds[0], 4096)
            assert os.fstat(fds[0]).st_size == Layout().size
        finally:
            for fd in fds:
                os.close(fd)
            s.close()


# -- specs and attach errors -----------------------------------------------------------------
@pytest.mark.parametrize("text, error", [
    ("3@shm:", "needs a path"),
    ("3@shm:/tmp/x,slots=100", "power of two"),
    ("3@shm:/tmp/x,frame=1000", "multiple of 64"),
    ("3@shm:/tmp/x,mtu=9000", "is not slots=N or frame=BYTES"),
])
def test_bad_shm_specs_are_one_line_errors(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_port_spec(text)


def test_shm_spec_defaults_and_options() -> None:
    s = parse_port_spec("3@shm:/run/x.sock,slots=1024,frame=9216")
    assert s.kind is PortKind.SHM and s.path == "/run/x.sock"
    assert s.layout == Layout(1024, 9216)
    assert parse_port_spec("4@shm:/run/y").layout == Layout()


def test_attach_errors_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(ShmError, match="No such file"):
        attach(str(tmp_path / "nothing"))
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(str(tmp_path / "other"))
    other.listen(1)
    try:
        def say() -> None:
            conn, _ = other.accept()
            conn.send(b"HTTP/1.0 200 OK\n")
            conn.close()
        threading.Thread(target=say, daemon=True).start()
        with pytest.raises(ShmError, match="not a netsum ring"):
            attach(str(tmp_path / "other"))
    finally:
        other.close()


def test_a_stale_socket_is_replaced_and_a_live_one_or_a_file_is_not(tmp_path: Path) -> None:
    from netsum.shmring import ShmServer
    path = str(tmp_path / "p")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()                                  # a socket file nobody listens on
    a = ShmServer(path, Layout(16, 64), 1)
    try:
        with pytest.raises(ShmError, match="served by another process"):
            ShmServer(path, Layout(16, 64), 2)
    finally:
        a.close()
    assert not os.path.exists(path)
    Path(path).write_text("keep me")
    with pytest.raises(ShmError, match="not a socket"):
        ShmServer(path, Layout(16, 64), 3)
    assert Path(path).read_text() == "keep me"

