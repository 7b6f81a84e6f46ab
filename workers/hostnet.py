"""TCP connections between worker hosts for the host all-reduces (ring, parameter server).

Owns: peer addresses, the listening socket, connecting with retries until a deadline (a peer
may not be listening yet), the HELLO handshake that checks who is at the other end, exact
reads with a deadline, the kernel's TCP counters of a socket (segments sent, retransmissions),
and `PeerError`, which always names the peer (rank and address) a failure is about.
"""
from __future__ import annotations

import errno
import select
import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from netsum.workers.errors import TransportError, WorkerError
from netsum.workers.ringplan import HEADER, HELLO, Header, Hello, Kind, RingWireError

__all__ = ["Peer", "PeerError", "TcpCounters", "tcp_counters", "listen", "connect_peer",
           "await_hello", "accept_peer", "recv_exact", "parse_peers", "DEFAULT_PORT"]

#: Default TCP port of the host all-reduces: the aggregation service's UDP port + 1.
DEFAULT_PORT = 0x6E74  # 28276

_RETRY = 0.05            # seconds between connection attempts
_SOCKBUF = 1 << 20       # bytes of kernel buffer per direction and socket


@dataclass(frozen=True, slots=True)
class Peer:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_peers(text: str, default_port: int = DEFAULT_PORT) -> tuple[Peer, ...]:
    """'10.0.0.1,10.0.0.2:9000' -> (Peer('10.0.0.1', default_port), Peer('10.0.0.2', 9000))."""
    out = []
    for i, item in enumerate(p.strip() for p in text.split(",")):
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, str(default_port)
        if not host:
            raise ValueError(f"peer {i}: {item!r} has no host")
        try:
            number = int(port)
        except ValueError:
            raise ValueError(f"peer {i}: {item!r}: port {port!r} is not a number") from None
        if not 1 <= number <= 65535:
            raise ValueError(f"peer {i}: {item!r}: port {number} is not in 1..65535")
        out.append(Peer(host, number))
    return tuple(out)


class PeerError(WorkerError):
    """A host all-reduce failed because of one peer (dead, silent, mis-configured).
    `rank` and `peer` say which; `timed_out` is true when the peer was merely silent."""

    def __init__(self, rank: int, peer: Peer, problem: str, timed_out: bool = False) -> None:
        super().__init__(f"rank {rank} ({peer}): {problem}")
        self.rank = rank
        self.peer = peer
        self.problem = problem
        self.timed_out = timed_out


@dataclass(frozen=True, slots=True)
class TcpCounters:
    """Kernel counters of one TCP socket (Linux `struct tcp_info`); zeros elsewhere."""
    segments_out: int = 0          # every segment sent, pure ACKs included
    data_segments_out: int = 0     # segments that carried data (retransmissions included)
    retransmissions: int = 0       # data segments sent again

    def __add__(self, other: "TcpCounters") -> "TcpCounters":
        return TcpCounters(*(a + b for a, b in zip(self._values(), other._values())))

    def __sub__(self, other: "TcpCounters") -> "TcpCounters":
        return TcpCounters(*(a - b for a, b in zip(self._values(), other._values())))

    def _values(self) -> tuple[int, int, int]:
        return self.segments_out, self.data_segments_out, self.retransmissions


# struct tcp_info (include/uapi/linux/tcp.h), u32 fields: tcpi_total_retrans at byte 100,
# tcpi_segs_out at 136 (kernels >= 4.2), tcpi_data_segs_out at 156 (>= 4.6).
_TCPI_TOTAL_RETRANS = 100
_TCPI_SEGS_OUT = 136
_TCPI_DATA_SEGS_OUT = 156
_TCP_INFO = getattr(socket, "TCP_INFO", 11)


def tcp_counters(sock: socket.socket) -> TcpCounters:
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 256)
    except OSError:
        return TcpCounters()
    if len(info) < _TCPI_DATA_SEGS_OUT + 4:
        return TcpCounters()
    (retrans,) = struct.unpack_from("=I", info, _TCPI_TOTAL_RETRANS)
    (segs,) = struct.unpack_from("=I", info, _TCPI_SEGS_OUT)
    (data,) = struct.unpack_from("=I", info, _TCPI_DATA_SEGS_OUT)
    return TcpCounters(segs, data, retrans)


def _tune(sock: socket.socket) -> None:
    # Nagle would hold the small EXPONENTS messages back for a delayed ACK (40 ms a hop).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, _SOCKBUF)
        except OSError:
            pass


def listen(me: Peer, backlog: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((me.host, me.port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise TransportError(f"cannot listen on {me}: {exc.strerror or exc}") from None
    return sock


def recv_exact(sock: socket.socket, size: int, deadline: float, what: Callable[[], str],
               clock: Callable[[], float] = time.monotonic) -> bytes:
    """`size` bytes from a blocking-mode socket before `deadline`; raises ConnectionError
    (closed) or TimeoutError, with `what()` in the message."""
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        left = deadline - clock()
        if left <= 0:
            raise TimeoutError(f"no {what()} within the deadline")
        sock.settimeout(left)
        try:
            n = sock.recv_into(view[got:])
        except socket.timeout:
            raise TimeoutError(f"no {what()} within the deadline") from None
        if n == 0:
            raise ConnectionError(f"closed the connection before sending {what()}")
        got += n
    return bytes(buf)


def _send_hello(sock: socket.socket, hello: Hello) -> None:
    head = Header(Kind.HELLO, hello.job, 0, 0, 0, HELLO).encode()
    sock.sendall(head + hello.encode())


def _read_hello(sock: socket.socket, deadline: float,
                clock: Callable[[], float] = time.monotonic) -> Hello:
    head = Header.decode(recv_exact(sock, HEADER, deadline, lambda: "HELLO", clock))
    if head.kind is not Kind.HELLO or head.blocks != HELLO:
        raise RingWireError(f"first message is {head.kind.name} of {head.blocks}, not HELLO")
    return Hello.decode(recv_exact(sock, HELLO, deadline, lambda: "HELLO", clock))


def _check_hello(got: Hello, want: Hello) -> str:
    """'' when `got` is the peer we expect, else what differs."""
    diffs = [f"{name} {getattr(got, name)} (expected {getattr(want, name)})"
             for name in ("algorithm", "job", "rank", "workers", "k")
             if getattr(got, name) != getattr(want, name)]
    return ", ".join(diffs)


def connect_peer(rank: int, peer: Peer, mine: Hello, deadline: float,
                 clock: Callable[[], float] = time.monotonic) -> socket.socket:
    """A connection to `peer` (rank `rank`) with our HELLO sent; its answer is read later by
    `await_hello`.  Not waiting for the answer here is what keeps a ring from deadlocking:
    every rank connects to its right, then accepts its left, then reads the right's answer.
    Refused connections are retried until `deadline` (the peer may not be listening yet)."""
    last = "no attempt"
    while True:
        left = deadline - clock()
        if left <= 0:
            raise PeerError(rank, peer, f"cannot connect: {last}", timed_out=True)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            _tune(sock)
            sock.settimeout(min(left, 1.0))
            sock.connect((peer.host, peer.port))
            _send_hello(sock, mine)
        except OSError as exc:
            sock.close()
            if isinstance(exc, socket.gaierror):
                raise PeerError(rank, peer, f"cannot resolve the address: {exc}") from None
            retry = (socket.timeout, ConnectionRefusedError, ConnectionResetError)
            if not isinstance(exc, retry) and exc.errno not in (
                    errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ETIMEDOUT, errno.EAGAIN):
                raise PeerError(rank, peer, f"cannot connect: {exc.strerror or exc}") from None
            last = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
            time.sleep(min(_RETRY, max(0.0, deadline - clock())))
            continue
        return sock


def await_hello(sock: socket.socket, rank: int, peer: Peer, theirs: Hello, deadline: float,
                clock: Callable[[], float] = time.monotonic) -> None:
    """Read the answer to our HELLO on a connection made by `connect_peer`; it must equal
    `theirs`.  The socket is closed on any failure."""
    try:
        got = _read_hello(sock, deadline, clock)
    except (OSError, TimeoutError, RingWireError) as exc:
        sock.close()
        if isinstance(exc, ConnectionResetError):
            # It accepted, then refused our HELLO (a mis-configured job or peer list).
            raise PeerError(rank, peer, "rejected this worker's HELLO (its own error says "
                            "why)") from None
        raise PeerError(rank, peer, f"handshake failed: {exc}",
                        timed_out=isinstance(exc, TimeoutError)) from None
    problem = _check_hello(got, theirs)
    if problem:
        sock.close()
        raise PeerError(rank, peer, f"is not the peer this worker expects: {problem}")


def accept_peer(listener: socket.socket, expected: Mapping[int, Peer], mine: Hello,
                theirs: Callable[[int], Hello], deadline: float,
                clock: Callable[[], float] = time.monotonic) -> tuple[socket.socket, int]:
    """The next connection from one of the `expected` ranks, and its rank: its HELLO must equal
    `theirs(rank)`; we answer with ours.  A connection that says something else is an error
    naming what it said."""
    while True:
        left = deadline - clock()
        if left <= 0:
            rank, peer = next(iter(expected.items()))
            others = f" (nor did rank{'s' if len(expected) > 2 else ''} " + ", ".join(
                str(r) for r in list(expected)[1:]) + ")" if len(expected) > 1 else ""
            raise PeerError(rank, peer, f"did not connect{others}", timed_out=True)
        ready, _, _ = select.select([listener], [], [], left)
        if not ready:
            continue
        sock, addr = listener.accept()
        rank, peer = next(iter(expected.items()))
        try:
            _tune(sock)
            got = _read_hello(sock, deadline, clock)
        except (OSError, TimeoutError, RingWireError) as exc:
            sock.close()
            raise PeerError(rank, peer, f"a connection from {addr[0]}:{addr[1]} sent no valid "
                            f"HELLO: {exc}", timed_out=isinstance(exc, TimeoutError)) from None
        if got.rank in expected:
            rank, peer = got.rank, expected[got.rank]
            problem = _check_hello(got, theirs(got.rank))
        else:
            problem = (f"it says rank {got.rank}, expected rank "
                       f"{' or '.join(str(r) for r in expected)}")
        if problem:
            # RST rather than FIN, so the other side sees a rejection, not an early close.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
            raise PeerError(rank, peer, f"a connection from {addr[0]}:{addr[1]} is not this "
                            f"peer: {problem}")
        _send_hello(sock, mine)
        return sock, rank
