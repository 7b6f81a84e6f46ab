"""UDP GSO/GRO on the switch's UDP-tunnel ports (netsum/udpgso.py, ioloop.c, ports.py).

The rules by hand first: how a coalesced buffer splits into datagrams and how a port's
outputs group into GSO sends.  Then a real PortSet on loopback running the router program
(port 1 -> port 2 for 10/8): its input is sent by port 1's peer partly as GSO sends (one
buffer of many datagrams, among them one with a 10-byte last datagram, too short for the
parser), all while the test holds the Device lock, so the C loop takes the whole input in one
wake-up; port 2's peer has UDP_GRO on and sees each GSO send of the switch as one buffer with
its segment size.  The buffers must be the groups derived by hand, the frames and counters
those of the Python loop fed the same datagrams one by one, and the Python loop must split a
coalesced buffer the same way when it serves the ports instead of the C loop.
"""
from __future__ import annotations

import json
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from portloop import looped
from netsum import udpgso
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Lpm, TableEntry
from netsum.switch.native import build
from netsum.switch.native import io as nio
from netsum.switch.pipeline import Pipeline
from netsum.switch.ports import PortSet, parse_port_spec

ROUTER_JSON = Path(__file__).resolve().parents[1] / "switch_json" / "router.json"
WHY = build.available()


def test_split_by_hand() -> None:
    assert udpgso.split(3000, 1000) == [(0, 1000), (1000, 1000), (2000, 1000)]
    assert udpgso.split(2510, 1000) == [(0, 1000), (1000, 1000), (2000, 510)]
    assert udpgso.split(1001, 1000) == [(0, 1000), (1000, 1)]
    assert udpgso.split(700, 1000) == [(0, 700)]          # not coalesced
    assert udpgso.split(700, 0) == [(0, 700)]             # no UDP_GRO cmsg
    assert udpgso.split(700, 700) == [(0, 700)]
    assert udpgso.segments(2510, 1000) == 3 and udpgso.segments(700, 0) == 1
    anc = [(socket.SOL_SOCKET, 1, b"\x00" * 8), (udpgso.SOL_UDP, udpgso.UDP_GRO,
                                                   struct.pack("=i", 1132))]
    assert udpgso.segment_size(anc) == 1132 and udpgso.segment_size([]) == 0


# Frame lengths of the router test's input, and their groups derived by hand from the rules
# (equal lengths; a shorter one ends a send; at most 64 datagrams and 65,507 bytes a send).
LENGTHS = [300, 300, 300, 120, 300, 300, 500] + [64] * 70 + [1400] * 50 + [1000]
GROUPS = [(0, 4),        # 300 x3 + 120: the shorter one ends it
          (4, 2),        # 300 x2: 500 is longer
          (6, 2),        # 500 + 64 (shorter, last)
          (8, 64),       # 64 x64: the segment limit
          (72, 5),       # 64 x5
          (77, 46),      # 1400 x46 = 64,400 bytes; a 47th would pass 65,507
          (123, 5)]      # 1400 x4 + 1000


def test_plan_groups_by_hand() -> None:
    assert udpgso.plan_groups(LENGTHS) == GROUPS
    assert udpgso.plan_groups([]) == []
    assert udpgso.plan_groups([100]) == [(0, 1)]
    assert udpgso.plan_groups([100, 200, 200, 100, 50]) == [(0, 1), (1, 3), (4, 1)]
    assert udpgso.plan_groups([10] * 5, max_segments=2) == [(0, 2), (2, 2), (4, 1)]
    assert udpgso.plan_groups([100, 100, 0, 0, 100]) == [(0, 2), (2, 1), (3, 1), (4, 1)]


def _frame(length: int, tag: int) -> bytes:
    """An IPv4 frame to 10.0.0.5 (the router sends it to port 2), `length` bytes."""
    head = bytes.fromhex("0200000000fe" "020000000002" "0800" "4500002e00004000" "4011") + \
        bytes(2) + struct.pack(">II", 0x0A010002, 0x0A000005)
    body = struct.pack(">I", tag) * (length // 4 + 1)
    return (head + body)[:length]


def _device() -> Device:
    dev = Device()
    dev.install(Pipeline(json.loads(ROUTER_JSON.read_text()), native=True))
    assert dev.pipeline is not None and dev.pipeline.native is not None
    dev.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        (Lpm(0x0A000000, 8),), ActionCall("MyIngress.ipv4_forward", (0x0200000000AA, 2))))
    return dev


def _gso_send(sock: socket.socket, frames: list[bytes], dest: tuple[str, int]) -> None:
    """One sendmsg of `frames` (equal lengths, the last possibly shorter) as a GSO send."""
    cm = [(udpgso.SOL_UDP, udpgso.UDP_SEGMENT, struct.pack("=H", len(frames[0])))]
    sock.sendmsg(frames, cm if len(frames) > 1 else [], 0, dest)


# The input: (frames sent as one GSO send).  Short: 10 bytes, a cut Ethernet header.
SHORT = b"\x02" * 10


def _sends() -> list[list[bytes]]:
    f = [_frame(n, i) for i, n in enumerate(LENGTHS)]
    return [f[0:3], [f[3]], f[4:6], [f[6]], f[7:40], f[40:77], f[77:110], f[110:127],
            [f[127]], [_frame(300, 900 + i) for i in range(5)] + [SHORT]]


def _expected_out() -> int:
    return len(LENGTHS) + 5


def _collect(sock: socket.socket, want: int, timeout: float = 10.0
             ) -> tuple[list[bytes], list[tuple[int, int]]]:
    """Frames received on `sock` (coalesced buffers split) and each buffer's (seg, length)."""
    frames: list[bytes] = []
    bufs: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    while len(frames) < want:
        assert time.monotonic() < deadline, (len(frames), want)
        try:
            data, anc, _fl, _a = sock.recvmsg(70000, 64)
        except BlockingIOError:
            time.sleep(0.002)
            continue
        seg = udpgso.segment_size(anc)
        bufs.append((seg, len(data)))
        frames += [data[o:o + n] for o, n in udpgso.split(len(data), seg)]
    return frames, bufs


def _run(io: str, coalesce: bool) -> tuple[Any, ...]:
    """The router on ports 1, 2, 3; the input sent as GSO sends (`coalesce`) or datagram by datagram, all of
    it while the Device lock is held."""
    dev = _device()
    with looped(dev, [1, 2, 3], io) as lp:
        lp.peers[2].setsockopt(udpgso.SOL_UDP, udpgso.UDP_GRO, 1)   # whatever NETSUM_UDP_GSO
        sender, dest = lp.peers[1], lp.addr[1]
        n = 0
        with dev.lock:
            for frames in _sends():
                if coalesce:
                    _gso_send(sender, frames, dest)
                else:
                    for fr in frames:
                        sender.sendto(fr, dest)
                n += len(frames)
        lp.taken += n
        lp._wait(10.0)
        frames, bufs = _collect(lp.peers[2], _expected_out())
        gso = lp.ps.fast.gso_stats() if lp.ps.fast is not None else {}
        status = lp.ps.io_status
        stats = dev.stats.as_dict()
    return frames, bufs, stats, gso, status


@pytest.mark.skipif(WHY is not None, reason=f"native backend not buildable: {WHY}")
def test_c_loop_splits_coalesced_input_and_groups_outputs_as_derived_by_hand(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(udpgso.ENV, "1")
    c_frames, c_bufs, c_stats, gso, status = _run("c", coalesce=True)
    py_frames, py_bufs, py_stats, _g, py_status = _run("python", coalesce=False)
    assert status == nio.RUNNING and py_status.startswith("python:")
    assert c_frames == py_frames and len(c_frames) == _expected_out()
    assert c_stats == py_stats
    assert c_stats["rx_packets"] == len(LENGTHS) + 6 and c_stats["parser_errors"] + \
        c_stats["dropped"] >= 1                      # the 10-byte datagram: counted, not sent
    # every datagram of the input went through the Python loop one by one: no coalescing
    assert all(seg == 0 for seg, _n in py_bufs) and len(py_bufs) == _expected_out()
    # the C loop's sends as derived by hand: the router's run, then the five 300-byte frames
    hand = [(LENGTHS[a] if n > 1 else 0, sum(LENGTHS[a:a + n])) for a, n in GROUPS]
    assert c_bufs == hand + [(300, 1500)]
    assert gso["tx_sends"] == len(GROUPS) + 1 and gso["refused"] == 0
    assert gso["rx_buffers"] == 7 and gso["rx_segments"] == 3 + 2 + 33 + 37 + 33 + 17 + 6


@pytest.mark.skipif(WHY is not None, reason=f"native backend not buildable: {WHY}")
def test_python_loop_splits_coalesced_input_when_the_c_loop_stands_aside(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The C loop attached (so the sockets have UDP_GRO) but the Python loop reading: its
    drain is called here directly, nothing else reads the sockets."""
    monkeypatch.setenv(udpgso.ENV, "1")
    monkeypatch.setenv(nio.ENV, "1")
    ref_frames, _b, ref_stats, _g, _s = _run("python", coalesce=False)
    dev = _device()
    peers = []
    for _ in range(3):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.setblocking(False)
        peers.append(s)
    ps = PortSet([parse_port_spec(f"{n + 1}@udp:127.0.0.1:0=127.0.0.1:"
                                  f"{peers[n].getsockname()[1]}") for n in range(3)], dev)
    ps.open()
    try:
        assert ps.fast is not None and ps.ports[1].gro and ps.ports[2].gro
        dest = ps.ports[1].sock.getsockname()
        for frames in _sends():
            _gso_send(peers[0], frames, dest)
        time.sleep(0.05)
        for _ in range(10):
            ps._drain(ps.ports[1])
        frames, bufs = _collect(peers[1], _expected_out())
        stats = dev.stats.as_dict()
    finally:
        ps.close()
        for s in peers:
            s.close()
    assert frames == ref_frames
    assert stats == ref_stats
    assert all(seg == 0 for seg, _n in bufs)        # the Python loop sends one by one


@pytest.mark.skipif(WHY is not None, reason=f"native backend not buildable: {WHY}")
def test_gso_off_sends_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(udpgso.ENV, "0")
    frames, bufs, _s, gso, status = _run("c", coalesce=False)
    assert status == nio.RUNNING
    assert len(frames) == _expected_out() and all(seg == 0 for seg, _n in bufs)
    assert gso["tx_sends"] == 0 and gso["ports_on"] == 0


def test_gso_sends_go_to_loopback_peers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(udpgso.ENV, "1")
    assert udpgso.sends_to("127.0.0.1") and udpgso.sends_to("127.3.2.1") and \
        udpgso.sends_to("::1")
    assert not udpgso.sends_to("10.0.0.1") and not udpgso.sends_to("192.0.2.7")
    assert not udpgso.sends_to("localhost")          # ports hold numeric peers
    monkeypatch.setenv(udpgso.ENV, "0")
    assert not udpgso.sends_to("127.0.0.1")


@pytest.mark.skipif(WHY is not None, reason=f"native backend not buildable: {WHY}")
def test_a_port_whose_peer_is_not_loopback_sends_one_by_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A UDP tunnel to another host may cross a shaped link: no GSO sends there (GRO on its
    socket is harmless: it only changes how what arrived is handed over)."""
    monkeypatch.setenv(udpgso.ENV, "1")
    monkeypatch.setenv(nio.ENV, "1")
    ps = PortSet([parse_port_spec("1@udp:127.0.0.1:0=127.0.0.1:9"),
                  parse_port_spec("2@udp:127.0.0.1:0=192.0.2.7:9")], _device())
    ps.open()
    try:
        assert ps.fast is not None and ps.fast.ready
        assert ps.fast.gso_stats()["ports_on"] == 1 and ps.fast._gso == [1]
        assert ps.ports[1].gro and ps.ports[2].gro
    finally:
        ps.close()


@pytest.mark.skipif(WHY is not None, reason=f"native backend not buildable: {WHY}")
def test_a_refused_gso_send_goes_out_one_by_one_and_gso_stays_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel refuses GSO on a socket without UDP checksums (SO_NO_CHECK: EINVAL): the
    same frames must still leave, in order, and the port sends one by one from then on."""
    monkeypatch.setenv(udpgso.ENV, "1")
    dev = _device()
    with looped(dev, [1, 2, 3], "c") as lp:
        lp.ps.ports[2].sock.setsockopt(socket.SOL_SOCKET, 11, 1)      # SO_NO_CHECK
        lp.peers[2].setsockopt(udpgso.SOL_UDP, udpgso.UDP_GRO, 1)
        sender, dest = lp.peers[1], lp.addr[1]
        frames = [_frame(300, i) for i in range(20)]
        for _ in range(2):
            with dev.lock:                      # one wake-up: a run of 20 for port 2
                _gso_send(sender, frames, dest)
            lp.taken += len(frames)
            lp._wait(10.0)
        got, bufs = _collect(lp.peers[2], 40)
        gso = lp.ps.fast.gso_stats()
    assert [g[34:] for g in got] == [f[34:] for f in frames] * 2 and len(bufs) == 40   # past IPv4
    assert gso["refused"] == 1 and gso["tx_sends"] == 0 and gso["ports_on"] == 2


@pytest.mark.skipif(WHY is not None, reason=f"native backend not buildable: {WHY}")
@pytest.mark.parametrize("io", ["c", "python-split"])
def test_a_coalesced_buffer_from_a_foreign_address_never_reaches_the_program(
        monkeypatch: pytest.MonkeyPatch, io: str) -> None:
    """A buffer has one source: from anyone but the port's peer, each of its datagrams is
    counted in udp_foreign and none is run (the C loop, and the Python loop's split)."""
    monkeypatch.setenv(udpgso.ENV, "1")
    dev = _device()
    frames = [_frame(300, i) for i in range(5)]
    with looped(dev, [1, 2], "c") as lp:
        if io == "c":
            with dev.lock:
                _gso_send(lp.foreign, frames, lp.addr[1])
            lp.taken += len(frames)
            lp._wait(10.0)
        else:
            lp._stop = True                     # the test drives the Python drain itself
            lp._thread.join(10)
            _gso_send(lp.foreign, frames, lp.addr[1])
            time.sleep(0.05)
            lp.ps._drain(lp.ps.ports[1])
        stats = dev.stats.as_dict()
    assert stats["udp_foreign"] == 5 and stats["rx_packets"] == 0 and stats["tx_packets"] == 0
