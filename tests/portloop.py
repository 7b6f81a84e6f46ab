"""A PortSet served by its own thread, for the differential tests of the port loops.

`LoopedPorts` opens a `netsum.switch.ports.PortSet` on one device with the C port loop
(netsum/switch/native/io.py) or the Python loop, runs `PortSet.run` in a thread and plays frames into
its ports from the ports' peers (UDP on 127.0.0.1, or the peer side of shared-memory ports,
netsum/shmring.py) or from interfaces (AF_PACKET on veths the caller made), or from a foreign
socket; it waits after each burst until the switch has taken
every frame, so two runs of one sequence see the same interleaving of ports, and collects what
comes out on every port in order.
"""
from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from netsum.shmring import ShmPeer, attach
from netsum.switch.device import Device
from netsum.switch.ports import PortSet, parse_port_spec

__all__ = ["LoopedPorts", "looped", "sent_out", "ENV"]

ENV = "NETSUM_NATIVE_IO"
PACKET_OUTGOING = 4
SOL_PACKET, PACKET_AUXDATA = 263, 8


def _sink(sock: socket.socket) -> socket.socket:
    try:
        sock.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)     # SO_RCVBUFFORCE (root)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    sock.setblocking(False)
    return sock


def _retag(data: bytes, anc: list[tuple[int, int, bytes]]) -> bytes:
    """The frame as it was on the wire: the kernel reports a received 802.1Q tag in
    tpacket_auxdata (tp_status, ..., tp_vlan_tci, tp_vlan_tpid) instead of the frame."""
    for level, kind, cdata in anc:
        if level == SOL_PACKET and kind == PACKET_AUXDATA and len(cdata) >= 20:
            status, tci, tpid = struct.unpack_from("=I", cdata)[0], *struct.unpack_from(
                "=HH", cdata, 16)
            if status & 0x10:                                    # TP_STATUS_VLAN_VALID
                tpid = tpid if status & 0x40 else 0x8100         # TP_STATUS_VLAN_TPID_VALID
                return data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
    return data


class LoopedPorts:
    def __init__(self, dev: Device, numbers: list[int], io: str,
                 ifaces: dict[int, tuple[str, str]] | None = None,
                 shm_dir: str | None = None) -> None:
        """`numbers`: UDP-tunnel ports (each with its own peer socket), or with `shm_dir`
        shared-memory ports (`N@shm:shm_dir/pN`, this object their peer; a frame meant to come
        from a foreign address is not sent: a ring has no other sender); `ifaces`: port ->
        (switch side, host side) of veth pairs, served as AF_PACKET ports."""
        self.dev = dev
        self.peers: dict[int, socket.socket] = {}
        self.rings: dict[int, ShmPeer] = {}
        #: shared-memory ports whose peer reads nothing for now (its ring fills up)
        self.muted: set[int] = set()
        specs = []
        for n in numbers:
            if shm_dir is not None:
                specs.append(parse_port_spec(f"{n}@shm:{shm_dir}/p{n}"))
                continue
            s = _sink(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
            s.bind(("127.0.0.1", 0))
            self.peers[n] = s
            specs.append(parse_port_spec(f"{n}@udp:127.0.0.1:0=127.0.0.1:{s.getsockname()[1]}"))
        for n, (sw_if, host_if) in (ifaces or {}).items():
            # protocol 0 until bound: an ETH_P_ALL socket hears every interface before bind()
            s = _sink(socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
            s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)     # to see VLAN tags as sent
            s.bind((host_if, 3))                             # ETH_P_ALL (CPython: htons)
            self.peers[n] = s
            specs.append(parse_port_spec(f"{n}@{sw_if}"))
        self.raw = set((ifaces or {}).keys())
        self.foreign = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.foreign.bind(("127.0.0.1", 0))
        self.ps = PortSet(specs, dev)
        self.ps.open()
        if self.ps.fast is not None:
            self.ps.fast.wait()
        self.io_status_at_open = self.ps.io_status
        if io == "c":
            assert self.ps.fast is not None and self.ps.fast.ready, self.ps.io_status
        else:
            assert self.ps.fast is None, self.ps.io_status
        self.addr = {n: p.sock.getsockname() for n, p in self.ps.ports.items()
                     if p.sock is not None}
        self.out: dict[int, list[bytes]] = {n: [] for n in [*self.peers, *(
            numbers if shm_dir is not None else [])]}
        self.taken = 0                 # frames the switch has received so far (incl. foreign)
        self._stop = False
        self._thread = threading.Thread(target=self.ps.run, args=(lambda: self._stop,),
                                        daemon=True)
        self._thread.start()
        if shm_dir is not None:        # the loop must run: it accepts the peers
            self.rings = {n: attach(f"{shm_dir}/p{n}") for n in numbers}

    def _seen(self) -> int:
        st = self.dev.stats
        return st.rx_packets + st.udp_foreign + st.shm_bad_desc

    def burst(self, frames: list[tuple[int, bytes, bool]], timeout: float = 10.0) -> None:
        """Send (port, frame, from a foreign address) in order and wait until the switch took
        them all.  Consecutive frames into one port go as one burst (the loop may take them in
        one batch); before a frame into another port the switch must have taken the ones
        before, so every run sees the same order across ports."""
        last = None
        for n, frame, foreign in frames:
            if n != last:
                self._wait(timeout)
                last = n
            if n in self.rings:
                if foreign:
                    continue
                while not self.rings[n].tx.put([frame]):
                    self._wait(timeout)         # the ring is full: the switch catches up
            elif n in self.raw:
                self.peers[n].send(frame)
            elif foreign:
                self.foreign.sendto(frame, self.addr[n])
            else:
                self.peers[n].sendto(frame, self.addr[n])
            self.taken += 1
        self._wait(timeout)
        self._drain()

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self._seen() < self.taken:
            assert time.monotonic() < deadline, (self._seen(), self.taken)
            time.sleep(0.0002)

    def _drain(self) -> None:
        for n, ring in self.rings.items():
            if n in self.muted:
                continue
            out = self.out[n]
            while ring.rx.take(1 << 20, lambda view: out.append(bytes(view))):
                pass
        for n, s in self.peers.items():
            while True:
                try:
                    data, anc, _fl, addr = s.recvmsg(70000, 64)
                except BlockingIOError:
                    break
                if n in self.raw:
                    if addr[2] == PACKET_OUTGOING:
                        continue        # what this side sent into the veth
                    data = _retag(data, anc)
                self.out[n].append(data)

    def finish(self, expected: Callable[[], int], timeout: float = 10.0) -> dict[int, list[bytes]]:
        """Collect until `expected()` frames came out on the ports, stop the loop."""
        deadline = time.monotonic() + timeout
        while True:
            self._drain()
            if sum(len(v) for v in self.out.values()) >= expected():
                break
            assert time.monotonic() < deadline, (sum(len(v) for v in self.out.values()),
                                                 expected())
            time.sleep(0.002)
        time.sleep(0.02)
        self._drain()
        return self.out

    def close(self) -> None:
        self._stop = True
        self._thread.join(10)
        for ring in self.rings.values():
            ring.close()
        self.ps.close()
        for s in [*self.peers.values(), self.foreign]:
            s.close()


@contextmanager
def looped(dev: Device, numbers: list[int], io: str,
           ifaces: dict[int, tuple[str, str]] | None = None,
           shm_dir: str | None = None) -> Iterator[LoopedPorts]:
    """LoopedPorts with NETSUM_NATIVE_IO set for `io` ("c" or "python") while opening."""
    old = os.environ.get(ENV)
    os.environ[ENV] = "1" if io == "c" else "0"
    try:
        lp = LoopedPorts(dev, numbers, io, ifaces, shm_dir)
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old
    try:
        yield lp
    finally:
        lp.close()


def sent_out(dev: Device, cpu_frames: list[Any] | None = None) -> Callable[[], int]:
    """The number of frames the device put on its ports so far (what `finish` waits for):
    outputs less those for a port without a socket, failed sends and CPU-port frames."""
    def n() -> int:
        st = dev.stats
        return st.tx_packets - st.no_tx_port - st.tx_errors - len(cpu_frames or [])
    return n
