"""Frames over a shared-memory ring pair to a netsum-switch port (`-i N@shm:PATH`).

`ShmFrameTransport` is `FrameTransport` (workers/transport.py: the worker builds whole
Ethernet/IPv4/UDP frames, frames coming back are validated the same way) with the UDP
socket replaced by `ShmLink`: the port's two rings (netsum/shmring.py, the format and trust
rules) instead of sendmmsg/recvmmsg on 127.0.0.1.  Sending copies each frame into the ring
towards the switch and publishes the batch with one index store (a system call only when the
switch sleeps: its doorbell); receiving polls the ring from the switch for
$NETSUM_SHM_SPIN_US (default 0) and then sleeps on this side's doorbell (select()).
A frame is copied out of the region into the transport's receive row before it is checked,
so the switch (or anything else that can write the region) cannot change it under the
checks.  With the compiled worker module the same loops, checks and trust rules run in C
(`ShmLink.cio`, workers/cio.py and wio.c), doorbells included.

Selecting it: `netsum-worker --shm PATH` (workers/cli.py), `ShmFrameTransport(PATH, ...)` in
code.  What FrameTransport would need to take this link without a subclass: a `link`
argument in place of the socket it opens (see `ShmFrameTransport.__init__`).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from netsum.shmring import ShmError, ShmPeer, attach, frame_for, spin_seconds
from netsum.wire import K_DEFAULT
from netsum.workers import wire
from netsum.workers.cio import CIo, CycleMany
from netsum.workers.errors import TransportError
from netsum.workers.transport import FrameTransport, TransportCounters

if TYPE_CHECKING:
    from netsum.workers.native import NativeCore

__all__ = ["ShmLink", "ShmFrameTransport"]

_DRAIN = 256            # frames read per receive call at most (as the UDP transports)
_SEND_WAIT = 0.5        # seconds to wait for room in a full ring before counting a drop


class ShmLink:
    """A port's ring pair with the calls FrameTransport makes on its UDP socket."""

    def __init__(self, path: str, timeout: float = 5.0) -> None:
        try:
            self._peer: ShmPeer = attach(path, timeout)
        except ShmError as exc:
            raise TransportError(str(exc)) from None
        self.path = path
        self.counters = TransportCounters()
        self._spin = spin_seconds()
        #: the receive and send loops in C (workers/cio.py), once rows are attached
        self.cio: CIo | None = None

    @property
    def frame_bytes(self) -> int:
        """The longest frame either ring holds (the port's `frame=`)."""
        return min(self._peer.tx.frame, self._peer.rx.frame)

    @property
    def address(self) -> tuple[str, int]:
        """(the port's socket path, the switch port number)."""
        return self.path, self._peer.number

    @property
    def syscalls(self) -> str:
        return "shared-memory rings (eventfd doorbells)"

    def attach_rows(self, rows: list[memoryview]) -> None:
        """Nothing to set up: frames are copied into whatever rows recv_rows is given."""

    def attach_cio(self, rx: object, skip: int, frame: int, headlen: int,
                   dest: object = None) -> None:
        """The C loops over the transport's rows `rx` (a workers.transport._Rows), where the
        compiled module is here (workers/cio.py)."""
        if self.cio is not None:
            self.cio.close()
        self.cio = CIo.shm(self._peer, self._spin, rx.buf, rx.rows,  # type: ignore[attr-defined]
                           len(rx.buf) // len(rx.rows), skip, frame,  # type: ignore[attr-defined]
                           headlen, self.counters)

    def sendto(self, data: bytes | memoryview, dest: object = None) -> None:
        self.send_rows([memoryview(data)], [0], dest)

    def send_rows(self, rows: Sequence[memoryview], slots: Sequence[int],
                  dest: object = None) -> None:
        tx, at, count = self._peer.tx, 0, len(slots)
        waited_until = 0.0
        while at < count:
            if not tx.fits(rows[slots[at]]):
                self.counters.send_dropped += 1
                self.counters.last_error = (f"frame of {len(rows[slots[at]])} bytes: longer "
                                            f"than the ring's {tx.frame}-byte buffers")
                at += 1
                continue
            got = tx.put(rows, slots, at)
            at += got
            self.counters.sent += got
            if at < count and not got:
                # The switch is behind: wait for room as a full socket buffer is waited for,
                # then count what still does not fit (the core retransmits it).
                now = time.monotonic()
                if not waited_until:
                    waited_until = now + _SEND_WAIT
                elif now >= waited_until:
                    self.counters.send_dropped += count - at
                    return
                time.sleep(50e-6)

    def recv_rows(self, rows: list[memoryview], timeout: float,
                  check: Callable[[int, int], bool]) -> int:
        """Frames into rows[0], rows[1], ... (the `_Socket.recv_rows` contract): `check(row,
        length)` keeps a row or lets the next frame overwrite it; waits up to `timeout` only
        when nothing is queued, then takes until the ring is empty or the rows are full."""
        cio = self.cio
        if cio is not None and rows is cio.rows:
            n = cio.recv(timeout, check)
            self._fold_cio(cio)
            return n
        rx = self._peer.rx
        if not rx.pending() and not rx.wait(timeout, self._spin):
            return 0
        limit = min(_DRAIN, len(rows))
        n = got = 0

        def sink(view: memoryview) -> None:
            nonlocal n
            length = len(view)
            row = rows[n]
            if length <= len(row):
                row[:length] = view
            if check(n, length):     # a longer frame: its length says enough to refuse it
                n += 1
        while n < limit:
            took = rx.take(limit - n, sink)
            if not took:
                break
            got += took
        self._fold(rx)
        self.counters.received += got
        return n

    def recv_many(self, timeout: float) -> list[bytes]:
        rx = self._peer.rx
        out: list[bytes] = []
        if not rx.pending() and not rx.wait(timeout, self._spin):
            return out
        rx.take(_DRAIN, lambda view: out.append(bytes(view)))
        self._fold(rx)
        self.counters.received += len(out)
        return out

    def _fold(self, rx: object) -> None:
        bad = getattr(rx, "bad_desc", 0) + getattr(rx, "bad_index", 0)
        if bad:
            self.counters.malformed += bad
            self.counters.last_error = "the switch's ring held impossible descriptors"
            setattr(rx, "bad_desc", 0)
            setattr(rx, "bad_index", 0)

    def _fold_cio(self, cio: CIo) -> None:
        """What the C loops found impossible, counted as _fold counts it."""
        if cio.bad:
            self.counters.malformed += cio.bad
            self.counters.last_error = "the switch's ring held impossible descriptors"
            cio.bad = 0
        if cio.tx_bad:
            self._peer.tx.bad_index += cio.tx_bad
            cio.tx_bad = 0

    def close(self) -> None:
        if self.cio is not None:
            self.cio.close()
            self.cio = None
        self._peer.close()


class ShmFrameTransport(FrameTransport):
    """FrameTransport over a shared-memory port: `path` is the port's socket (the
    `-i N@shm:PATH` of the switch), `local` this worker's MAC/IPv4/UDP port as the controller
    knows it, `service` the switch's aggregation service address."""

    def __init__(self, path: str, local: wire.Endpoint, service: wire.Endpoint,
                 k: int = K_DEFAULT, timeout: float = 5.0) -> None:
        link = ShmLink(path, timeout)
        try:
            super().__init__(("127.0.0.1", 0), local, service, ("127.0.0.1", 0), k=k)
            ring = link.frame_bytes
            if self._frame > ring:   # every frame would be refused by the ring, one by one
                raise TransportError(
                    f"shared-memory port {path}: its rings hold frames of up to {ring} bytes, "
                    f"a K={k} frame is {self._frame}: start the switch port with "
                    f"frame={frame_for(self._frame)} or more (-i N@shm:PATH,"
                    f"frame={frame_for(self._frame)})")
        except BaseException:
            link.close()
            raise
        # FrameTransport opened a UDP socket of its own: the ring takes its place (the
        # hook FrameTransport lacks, see the module docstring).
        self._sock.close()
        self._sock = link  # type: ignore[assignment]
        link.attach_rows(self._rx.rows)
        link.attach_cio(self._rx, len(self._prefix), self._frame, self._head)

    def receive_cycle(self, core: NativeCore, timeout: float, clock: Callable[[], float],
                      job: int) -> tuple[int, int]:
        """One wake-up for one compiled core in C (CIo.cycle)."""
        link = self._sock
        assert isinstance(link, ShmLink) and link.cio is not None
        try:
            return link.cio.cycle(core, timeout, clock, job, self._checker(), self.send_frames,
                                  self.rx_payloads)
        finally:
            link._fold_cio(link.cio)

    def receive_cycle_many(self, cores: Sequence[NativeCore], quiet: tuple[int, ...],
                           timeout: float, clock: Callable[[], float]) -> CycleMany:
        """One wake-up for several compiled cores in C (CIo.cycle_many)."""
        link = self._sock
        assert isinstance(link, ShmLink) and link.cio is not None
        try:
            return link.cio.cycle_many(cores, quiet, timeout, clock, self._checker(),
                                       self.send_frames)
        finally:
            link._fold_cio(link.cio)
