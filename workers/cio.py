"""The worker's I/O loops in C (workers/wio.c, compiled into the worker core's module): `CIo`,
one transport's receive rows and its way out, driven from C.

A transport that can (`_Socket` with recvmmsg/sendmmsg, `ShmLink`) makes one when its receive
rows are set up (`attach`), and then:
* `recv` -- the transport's `recv_rows`: a batch into the rows, the fast frame check done in
  C (the datagram's length and its first bytes against heads that passed every check);
  whatever fails it goes to the transport's own Python check, in order, and C resumes.
* `send_core` -- a compiled core's queued frames (rows 0..n-1 of its output buffer) out with
  one sendmmsg / one ring put; what the kernel or the ring did not take goes through the
  transport's Python send (which waits or counts the drop, as before).
* `cycle` -- one wake-up of the driver for one compiled core: receive, the core's accept and
  launches, send, in one C call; anything unusual (a frame to check, a payload of another
  job, a frame the core leaves to Python, an error) comes back to be finished in Python the
  way the Python loop does it.
* `cycle_many` -- the same for several compiled cores (the training lanes): each payload to
  the core of its job id as Driver's Python routing does it, every core's frames out in one
  sendmmsg; a core that stops at a payload (one it leaves to Python, or an error) is finished
  by the driver, and it and the cores after it send from Python, in the same order.

Over UDP, C sends a core's frames (one length, back to back) as GSO sends of up to 64
datagrams each where the destination is a loopback address (the UDP-tunnel ports; not the
kernel-UDP transport in Mininet or namespaces, whose links may be shaped), and with UDP_GRO on the socket reads coalesced buffers and copies each
datagram into its own row (workers/wgso.c, netsum/udpgso.py; `NETSUM_UDP_GSO=0`: off), so
the checks, rows and counters after the read are the same; `gso_stats()` counts both.

The transports' counters are kept as before (C reports what it read, sent and found bad).
`NETSUM_WORKER_CIO=0` keeps the I/O in Python (the compiled core still runs), as
`NETSUM_WORKER_NATIVE=0` (everything in Python) and a machine without a C compiler do;
tests/unit/test_cio.py runs both paths on the same traffic.
"""
from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from netsum import udpgso
from netsum.workers.errors import TransportError
from netsum.workers.native import native_module, native_status

if TYPE_CHECKING:
    from netsum.workers.native import NativeCore
    from netsum.workers.transport import TransportCounters

__all__ = ["CIo", "CycleMany", "ENV", "enabled", "DONE", "CHECK", "ROUTE", "CODE"]

ENV = "NETSUM_WORKER_CIO"
DONE, CHECK, ROUTE, CODE = range(4)


@dataclass(frozen=True, slots=True)
class CycleMany:
    """What `CIo.cycle_many` did.  `status` DONE: the batch's `rows` were routed and taken in
    C (`per_core[i]` = (payloads taken, frames queued, frames sent, code, the batch index it
    stopped at or -1) for cores[i]; code -1: no payload of its job; `order`: the cores in the
    order their jobs first appeared, the order they send in).  ROUTE: `rows` are received and
    checked but not handed to any core (the caller routes them)."""
    status: int
    rows: int
    now: float = 0.0
    foreign: int = 0
    order: tuple[int, ...] = ()
    per_core: tuple[tuple[int, int, int, int, int], ...] = ()


def enabled() -> bool:
    """Whether transports set up from now on drive their I/O from C."""
    if os.environ.get(ENV, "").strip() == "0":
        return False
    return native_status()[0]


class CIo:
    """One transport's C I/O (see the module docstring); `rows` are the receive rows it was
    made for (the transport's `recv_rows` takes the C path for those rows only)."""

    def __init__(self, cap: object, mod: Any, rows: list[memoryview], headlen: int,
                 frame: int, counters: TransportCounters) -> None:
        self._cap, self._mod = cap, mod
        self.rows = rows
        self._headlen, self._frame = headlen, frame
        self.counters = counters
        #: impossible ring indices and descriptors seen (shm), folded by the link
        self.bad = 0
        self.tx_bad = 0
        #: UDP: datagrams may arrive coalesced (UDP_GRO on the socket): C splits them
        self.gro = False

    @classmethod
    def udp(cls, sock: socket.socket, buf: bytearray, rows: list[memoryview], rowlen: int,
            skip: int, frame: int, headlen: int, dest: tuple[str, int],
            counters: TransportCounters) -> CIo | None:
        """Over a UDP socket (non-blocking); None where the C I/O is off or not built."""
        mod = native_module() if enabled() else None
        if mod is None:
            return None
        ip = int.from_bytes(socket.inet_aton(dest[0]), "big")
        cap = mod.io_udp(sock.fileno(), buf, len(rows), rowlen, skip, frame, headlen, ip,
                         dest[1])
        io = cls(cap, mod, rows, headlen, frame, counters)
        if udpgso.enabled():
            rx = udpgso.enable_gro(sock)
            _tx, on = mod.io_gso(cap, udpgso.sends_to(dest[0]), rx)
            if rx and not on:           # too few rows for a coalesced buffer: one by one
                sock.setsockopt(udpgso.SOL_UDP, udpgso.UDP_GRO, 0)
            io.gro = bool(on)
        return io

    @classmethod
    def shm(cls, peer: Any, spin: float, buf: bytearray, rows: list[memoryview], rowlen: int,
            skip: int, frame: int, headlen: int, counters: TransportCounters) -> CIo | None:
        """Over a shared-memory port's rings (netsum.shmring.ShmPeer: the peer produces
        ring TO_SWITCH and consumes TO_PEER)."""
        from netsum.shmring import TO_PEER, TO_SWITCH
        mod = native_module() if enabled() else None
        if mod is None:
            return None
        lay = peer.layout
        cap = mod.io_shm(peer.view, lay.slots, lay.frame, lay.ctrl(TO_PEER), lay.desc(TO_PEER),
                         lay.buffers(TO_PEER), lay.ctrl(TO_SWITCH), lay.desc(TO_SWITCH),
                         lay.buffers(TO_SWITCH), peer.rx._bell, peer.tx._bell, spin, buf,
                         len(rows), rowlen, skip, frame, headlen)
        return cls(cap, mod, rows, headlen, frame, counters)

    def gso_stats(self) -> dict[str, int]:
        """GSO/GRO since the last call (UDP; zeros where off): coalesced buffers read and
        their datagrams, GSO sends and their datagrams, sends refused as GSO, datagrams cut
        for want of rows; whether GSO sends and GRO reads are on now."""
        names = ("rx_buffers", "rx_segments", "tx_sends", "tx_segments", "refused", "cut",
                 "tx_on", "rx_on")
        return dict(zip(names, self._mod.io_gso_stats(self._cap)))

    def close(self) -> None:
        self._mod.io_close(self._cap)

    # -- receive ---------------------------------------------------------------------------

    def recv(self, timeout: float, check: Callable[[int, int], bool]) -> int:
        """The transport's recv_rows over this Io's rows: how many rows hold a packet."""
        mod, cap = self._mod, self._cap
        try:
            status, n, length, got, bad = mod.io_recv(cap, timeout, -1)
        except OSError as exc:
            raise TransportError(f"receiving: {exc.strerror}") from None
        return self._finish(check, status, n, length, got, bad)

    def _finish(self, check: Callable[[int, int], bool], status: int, n: int, length: int,
                got: int, bad: int) -> int:
        """Python's check on each row C declined, in order, C resuming after each."""
        mod, cap = self._mod, self._cap
        while status == CHECK:
            status, n, length, got, bad = mod.io_recv(cap, 0.0, int(self._check(check, n,
                                                                                length)))
        self._count(got, bad)
        return int(n)

    def _check(self, check: Callable[[int, int], bool], n: int, length: int) -> bool:
        ok = check(n, length)
        if ok and self._headlen and length == self._frame:
            self._mod.io_good(self._cap, self.rows[n][:self._headlen])
        return ok

    def _count(self, got: int, bad: int) -> None:
        self.counters.received += got
        if bad:
            self.bad += bad

    # -- send ------------------------------------------------------------------------------

    def send_core(self, core: NativeCore, count: int, rest: Callable[[Sequence[memoryview],
                                                                      Sequence[int]], None],
                  first: int = 0) -> None:
        """core.frames[first:count] out; what C could not send goes to `rest` (the
        transport's Python send_rows)."""
        if count <= first:
            return
        sent, txbad = self._mod.io_send(self._cap, core._c, first)
        self.counters.sent += sent
        self.tx_bad += txbad
        if first + sent < count:
            rest(core.frames, range(first + sent, count))

    # -- one wake-up -----------------------------------------------------------------------

    def cycle(self, core: NativeCore, timeout: float, clock: Callable[[], float], job: int,
              check: Callable[[int, int], bool],
              rest: Callable[[Sequence[memoryview], Sequence[int]], None],
              payloads: Sequence[memoryview]) -> tuple[int, int]:
        """Receive, take, send for `core` (job >= 0: only payloads of that job, else ROUTE).
        Returns (DONE, rows) when the batch was handled whole, or (ROUTE, rows) when the rows
        are received and checked but not handed to the core (the caller routes them); errors
        of the core are raised as its Python path raises them."""
        try:
            status, n, x, now, got, bad, sent, txbad = self._mod.io_cycle(
                self._cap, core._c, timeout, clock, job)
        except OSError as exc:
            raise TransportError(f"receiving: {exc.strerror}") from None
        if status == CHECK:      # rare: finish the receive in Python's order, then route
            return ROUTE, self._finish(check, status, n, x, got, bad)
        self._count(got, bad)
        if status == ROUTE or not n:
            return ROUTE if n else DONE, int(n)
        if status == CODE:       # the core stopped at payload x: SLOW, or an error
            core._after(sent)    # raises the error
            core._slow(payloads[x], now)
            out = core._receive_rest(payloads, x + 1, n, now)
            self.send_core(core, out, rest)
            return DONE, int(n)
        core._after(0)
        self.counters.sent += sent
        self.tx_bad += txbad
        if sent < x:
            rest(core.frames, range(sent, x))
        return DONE, int(n)

    def cycle_many(self, cores: Sequence[NativeCore], quiet: tuple[int, ...], timeout: float,
                   clock: Callable[[], float], check: Callable[[int, int], bool],
                   rest: Callable[[Sequence[memoryview], Sequence[int]], None]) -> CycleMany:
        """Receive, route by job id, take, send for several compiled cores (`quiet`: jobs
        whose payloads are not counted as foreign).  What C sent is counted; frames the
        kernel did not take, and every frame of a stopped core and of the cores after it,
        are the caller's to send (Driver._poll_cio_many)."""
        try:
            status, n, x, got, bad, foreign, sent, txbad, order, per = self._mod.io_cycle_many(
                self._cap, tuple(c._c for c in cores), tuple(c._job_id for c in cores), quiet,
                timeout, clock)
        except OSError as exc:
            raise TransportError(f"receiving: {exc.strerror}") from None
        if status == CHECK:      # rare: finish the receive in Python's order, then route
            return CycleMany(ROUTE, self._finish(check, status, n, int(x), got, bad))
        self._count(got, bad)
        if status == ROUTE or not n:
            return CycleMany(ROUTE if n else DONE, int(n))
        self.counters.sent += sent
        self.tx_bad += txbad
        return CycleMany(DONE, int(n), float(x), int(foreign), order, per)
