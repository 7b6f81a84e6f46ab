"""The event loop of the host all-reduces: TCP streams of pieces to and from peers.

Owns: a `Link` per connected peer (its socket and its queue of bytes to send), an `Inbound`
per stream a pass reads (the messages expected on it, in order, each checked against its
header before its payload is used), and `pump`, which sends and receives on every link at once
until every inbound stream is read and every queue is sent.  Non-blocking sockets and
`select`: one thread, no deadlock whatever order peers send in, because sending never waits
for receiving.  A failure names the peer: closed or reset connection, a message other than the
expected one, values out of range, no progress for `timeout` seconds; `end` bounds the pass.
"""
from __future__ import annotations

import select
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from netsum.workers.errors import WorkerTimeoutError
from netsum.workers.hostnet import Peer, PeerError
from netsum.workers.ringplan import HEADER, Header, Kind, Piece, RingWireError

__all__ = ["Link", "Inbound", "PassCounters", "pump", "message"]


def message(kind: Kind, job: int, call: int, step: int, p: Piece, payload: bytes) -> bytes:
    return Header(kind, job, call, step, p.first_block, p.blocks).encode() + payload


class Link:
    """One connected peer: its socket (non-blocking) and what is queued for it."""
    __slots__ = ("sock", "rank", "peer", "out")

    def __init__(self, sock: socket.socket, rank: int, peer: Peer) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.rank = rank
        self.peer = peer
        self.out: deque[memoryview] = deque()

    def queue(self, data: bytes) -> None:
        self.out.append(memoryview(data))

    def queued(self) -> int:
        return sum(len(v) for v in self.out)

    def error(self, problem: str, timed_out: bool = False) -> PeerError:
        return PeerError(self.rank, self.peer, problem, timed_out)


@dataclass(slots=True)
class PassCounters:
    sent: int = 0
    received: int = 0


class Inbound:
    """The messages one pass expects from one link, in stream order: optionally BEGIN (the
    call's element count), then `expected` (step, piece) messages of `kind`, `width` values
    of dtype `wire` per block.  `handle(step, piece, data)` gets each payload; `limit(step)`,
    when given, bounds |value| of a payload (values a sender's contributions cannot reach
    mean a broken or hostile peer, and are refused before they are added)."""

    def __init__(self, link: Link, kind: Kind, job: int, call: int,
                 expected: Sequence[tuple[int, Piece]], width: int, wire: np.dtype,
                 handle: Callable[[int, Piece, np.ndarray], None],
                 limit: Callable[[int], int] | None = None, begin: int | None = None,
                 describe: Callable[[int], str] | None = None) -> None:
        self.link = link
        self.kind = kind
        self.job = job
        self.call = call
        self.expected = expected
        self.width = width
        self.wire = wire
        self.handle = handle
        self.limit = limit
        self.begin = begin                 # element count a BEGIN must carry; None: no BEGIN
        self.describe = describe or (lambda step: f"step {step}")
        self.i = 0
        self.got = 0
        self.header: Header | None = None
        self.head_buf = bytearray(HEADER)
        most = max((p.blocks for _, p in expected), default=0)
        self.body_buf = bytearray(most * width * wire.itemsize)

    @property
    def done(self) -> bool:
        return self.begin is None and self.i >= len(self.expected)

    def where(self) -> str:
        if self.begin is not None:
            return f"the start of call {self.call}"
        if self.i >= len(self.expected):
            return "the end of the pass"
        g, p = self.expected[self.i]
        return f"{self.kind.name.lower()} {self.describe(g)}, blocks {p.first_block}..{p.stop - 1}"

    def read(self, counters: PassCounters) -> bool:
        """Read what is there without blocking; True when something was read."""
        progressed = False
        while not self.done:
            if self.header is None:
                view = memoryview(self.head_buf)[self.got:]
            else:
                view = memoryview(self.body_buf)[self.got:self._size(self.header)]
            try:
                n = self.link.sock.recv_into(view)
            except BlockingIOError:
                break
            except OSError as exc:
                raise self.link.error(f"connection lost at {self.where()}: "
                                      f"{exc.strerror or exc}") from None
            if n == 0:
                raise self.link.error(f"closed the connection at {self.where()}")
            progressed = True
            self.got += n
            counters.received += n
            if self.header is None:
                if self.got < HEADER:
                    continue
                self.got = 0
                self._header()
                if self.header is None or self.got < self._size(self.header):
                    continue
            elif self.got < self._size(self.header):
                continue
            self._payload()
        return progressed

    def _size(self, h: Header) -> int:
        return h.blocks * self.width * self.wire.itemsize

    def _header(self) -> None:
        try:
            h = Header.decode(self.head_buf)
        except RingWireError as exc:
            raise self.link.error(f"sent a bad message at {self.where()}: {exc}") from None
        if self.begin is not None:
            if h.kind is not Kind.BEGIN or h.job != self.job or h.call != self.call & 0xFFFF:
                raise self.link.error(f"opened call {self.call} with {h.kind.name} (job {h.job}, "
                                      f"call {h.call}), expected BEGIN of job {self.job}")
            if h.first_block != self.begin:
                raise self.link.error(f"all-reduces {h.first_block} elements, this worker "
                                      f"{self.begin}: every rank must give a tensor of the "
                                      "same length")
            self.begin = None
            return
        g, p = self.expected[self.i]
        if (h.kind, h.job, h.call, h.step, h.first_block, h.blocks) != (
                self.kind, self.job, self.call & 0xFFFF, g, p.first_block, p.blocks):
            raise self.link.error(f"sent {h.kind.name} job {h.job} call {h.call} step {h.step} "
                                  f"blocks {h.first_block}+{h.blocks}, expected {self.where()} "
                                  f"of job {self.job} call {self.call}")
        self.header = h

    def _payload(self) -> None:
        g, p = self.expected[self.i]
        data = np.frombuffer(self.body_buf, dtype=self.wire,
                             count=p.blocks * self.width).reshape(p.blocks, self.width)
        if self.limit is not None:
            lim = self.limit(g)
            if int(data.max()) > lim or int(data.min()) < -lim:
                raise self.link.error(f"sent values beyond |{lim}| (more than its "
                                      f"contributions can sum to) at {self.where()}")
        self.header, self.got = None, 0
        self.i += 1
        self.handle(g, p, data)


def pump(links: Sequence[Link], inbound: Sequence[Inbound], timeout: float, end: float | None,
         what: str, clock: Callable[[], float] = time.monotonic) -> PassCounters:
    """Send every link's queue and read every inbound stream until all are done.  Handlers may
    queue more bytes on any link meanwhile."""
    counters = PassCounters()
    progress = clock()
    by_sock = {ib.link.sock: ib for ib in inbound}
    while True:
        reading = [ib.link.sock for ib in inbound if not ib.done]
        writing = [ln.sock for ln in links if ln.out]
        if not reading and not writing:
            return counters
        now = clock()
        if end is not None and now >= end:
            waiting = next((ib for ib in inbound if not ib.done), None)
            at = f" (at {waiting.where()} from rank {waiting.link.rank})" if waiting else ""
            raise WorkerTimeoutError(f"{what} did not finish within its deadline{at}")
        if now - progress >= timeout:
            for ib in inbound:
                if not ib.done:
                    raise ib.link.error(f"sent nothing for {timeout:g} s (waiting for "
                                        f"{ib.where()})", timed_out=True)
            ln = next(ln for ln in links if ln.out)
            raise ln.error(f"read nothing for {timeout:g} s ({ln.queued()} bytes queued for "
                           "it)", timed_out=True)
        wait = progress + timeout - now
        if end is not None:
            wait = min(wait, end - now)
        readable, writable, _ = select.select(reading, writing, [], max(0.0, wait))
        for ln in links:
            if ln.sock not in writable:
                continue
            try:
                while ln.out:
                    sent = ln.sock.send(ln.out[0])
                    counters.sent += sent
                    progress = clock()
                    if sent < len(ln.out[0]):
                        ln.out[0] = ln.out[0][sent:]
                        break
                    ln.out.popleft()
            except BlockingIOError:
                pass
            except OSError as exc:
                raise ln.error(f"connection lost while sending ({what}): "
                               f"{exc.strerror or exc}") from None
        for sock in readable:
            if by_sock[sock].read(counters):
                progress = clock()
