"""A test-side impaired network between workers and a netsum-switch's UDP-tunnel ports, on
real sockets: one relay per worker, each direction of each link losing, duplicating and
reordering datagrams (whole Ethernet frames), and a check of every RESULT the switch sends,
before it is impaired, against the integer sums the test expects.

Per link: the worker sends to `worker_side` (and receives from it); the relay forwards from
the switch port's fixed peer address to the port.  In each direction an arriving datagram is
lost with probability `loss`, else queued (twice with probability `dup`) to leave after a
uniformly random 0..window-1 further arrivals, so it is overtaken by at most window - 1 later
ones, and any of them may be; with probability `late` a copy is held back much longer (up to
`late_window` arrivals): the old duplicate that turns up after its slot moved on.  A copy
also leaves once it has waited `hold` seconds (`late_hold` for a late one): a quiet link --
a worker waiting for results, the end of a job -- must not keep its packets forever.  One
thread runs it all.
"""
from __future__ import annotations

import heapq
import random
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from netsum.workers import wire

__all__ = ["Direction", "ImpairedNet"]

_NETSUM_AT = 14 + 20 + 8
_RESULT_KEY = wire.field_reader(("msg_type", "slot", "round", "offset"))


@dataclass
class Direction:
    """One direction of one link: its queue and what happened to its datagrams."""
    out: socket.socket
    to: tuple[str, int]
    # (due arrival, deadline, seq, frame), a heap on the due arrival
    queue: list[tuple[int, float, int, bytes]] = field(default_factory=list)
    arrivals: int = 0
    seen: int = 0
    lost: int = 0
    duplicated: int = 0
    sent: int = 0


class ImpairedNet:
    def __init__(self, switch_ports: list[int], peers: list[int], workers: list[int],
                 seed: int, loss: float = 0.1, dup: float = 0.1, window: int = 64,
                 late: float = 0.0, late_window: int = 2000, hold: float = 0.005,
                 late_hold: float = 0.2,
                 check: Callable[[bytes], None] | None = None,
                 on_up: Callable[[int], None] | None = None) -> None:
        """`switch_ports[i]`: worker i's switch port (UDP); `peers[i]`: that port's fixed peer
        (bound here); `workers[i]`: the address worker i binds.  `check(frame)` sees every
        frame the switch sends, before impairment.  `on_up(i)` runs in the relay's thread after
        each datagram worker i sent arrived, e.g. to inject frames with `send_up`."""
        self.rng = random.Random(seed)
        self.loss, self.dup, self.window, self.hold = loss, dup, window, hold
        self.late, self.late_window, self.late_hold = late, late_window, late_hold
        self.check = check
        self.on_up = on_up
        self.sel = selectors.DefaultSelector()
        self.worker_side: list[tuple[str, int]] = []
        self.up: list[Direction] = []
        self.down: list[Direction] = []
        self.errors: list[BaseException] = []
        for sw, peer, wk in zip(switch_ports, peers, workers):
            w_sock, s_sock = self._socket(0), self._socket(peer)
            self.worker_side.append(w_sock.getsockname())
            up = Direction(s_sock, ("127.0.0.1", sw))
            down = Direction(w_sock, ("127.0.0.1", wk))
            self.up.append(up)
            self.down.append(down)
            self.sel.register(w_sock, selectors.EVENT_READ, (up, ("127.0.0.1", wk)))
            self.sel.register(s_sock, selectors.EVENT_READ, (down, ("127.0.0.1", sw)))
        self._seq = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _socket(port: int) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            s.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
        s.bind(("127.0.0.1", port))
        s.setblocking(False)
        return s

    def __enter__(self) -> "ImpairedNet":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        self.sel.close()

    def _arrive(self, d: Direction, frame: bytes, now: float) -> None:
        d.seen += 1
        d.arrivals += 1
        if self.rng.random() >= self.loss:
            copies = 2 if self.rng.random() < self.dup else 1
            d.duplicated += copies - 1
            for _ in range(copies):
                late = self.rng.random() < self.late
                due = d.arrivals + self.rng.randrange(self.late_window if late else self.window)
                self._seq += 1     # ties leave in arrival order
                heapq.heappush(d.queue, (due, now + (self.late_hold if late else self.hold),
                                         self._seq, frame))
        else:
            d.lost += 1
        while d.queue and d.queue[0][0] <= d.arrivals:
            self._send(d, heapq.heappop(d.queue)[3])

    def _send(self, d: Direction, frame: bytes) -> None:
        d.out.sendto(frame, d.to)
        d.sent += 1

    def send_up(self, link: int, frame: bytes) -> None:
        """`frame` into link `link`'s switch port from its fixed peer address, unimpaired (a
        frame that address sent besides the worker's: the fuzz tests' injection)."""
        self.up[link].out.sendto(frame, self.up[link].to)

    def _expire(self, d: Direction, now: float) -> None:
        """Send what has waited its time, in the order it was due."""
        if not d.queue or min(e[1] for e in d.queue) > now:
            return
        keep = [e for e in d.queue if e[1] > now]
        for e in sorted(e for e in d.queue if e[1] <= now):
            self._send(d, e[3])
        heapq.heapify(keep)
        d.queue = keep

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                for key, _ in self.sel.select(self.hold / 4):
                    d, sender = key.data
                    for _ in range(64):
                        try:
                            frame, addr = key.fileobj.recvfrom(65535)  # type: ignore[union-attr]
                        except BlockingIOError:
                            break
                        if addr != sender:
                            continue          # not this link's other end
                        if d in self.down and self.check is not None:
                            self.check(frame)
                        self._arrive(d, frame, now)
                        if self.on_up is not None and d in self.up:
                            self.on_up(self.up.index(d))
                now = time.monotonic()
                for d in (*self.up, *self.down):
                    self._expire(d, now)
        except BaseException as exc:   # reported by the test
            self.errors.append(exc)

    def totals(self) -> dict[str, int]:
        every = (*self.up, *self.down)
        return {"seen": sum(d.seen for d in every), "lost": sum(d.lost for d in every),
                "duplicated": sum(d.duplicated for d in every),
                "data_seen": sum(d.seen for d in self.up)}


def result_key(frame: bytes) -> tuple[int, int, int, int]:
    """(msg_type, slot, round, offset) of a netsum frame."""
    msg, slot, rnd, off = _RESULT_KEY(memoryview(frame)[_NETSUM_AT:])
    return msg, slot, rnd, off
