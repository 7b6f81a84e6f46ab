"""Transports: thin socket shells that move netsum payloads for the worker core.

* `UdpTransport` - kernel UDP: the worker binds its own IP:port and connects the socket to the
  aggregation service address:UDP_PORT (inside a network namespace or Mininet host, real IP
  stack); the kernel then delivers datagrams from that address and port only.
* `FrameTransport` - unprivileged: the worker builds whole Ethernet/IPv4/UDP frames itself
  (its own MAC/IPv4) and sends each as one UDP datagram to an embedded switch port on
  127.0.0.1 (`netsum-switch -i N@udp:127.0.0.1:PORT=PEER`, where PEER is the address this
  transport binds: the switch takes datagrams from its port's peer only); frames coming back
  are parsed and validated in full (docs/protocol.md, "What a worker trusts": from the service
  address and port, to this worker's MAC, address and port), and only their netsum payloads
  are handed on.

Both keep one socket open and send prebuilt bytes (the frame prefix is computed once).  Both
are non-blocking; `receive(timeout)` waits up to `timeout` and drains what is queued.

The hot path of `netsum.workers.allreduce` (`BatchTransport`) moves no bytes objects: `send_frames`
sends the worker core's frames in place (memoryviews of its one buffer per window, which
carry `frame_prefix`), and `receive_into` drains the socket with `recv_into` into preallocated
rows, checks each frame by comparing its first bytes with the last header block that passed
every check (the verdict depends on nothing else, see `FrameTransport.receive_into`), and
leaves the payloads in `rx_payloads[0:n]`.  Datagrams that are anything else take the full
path of `receive`: valid payloads of an unusual shape go to `rx_other`, the rest are counted.
Where recvmmsg/sendmmsg are used and the compiled worker module is here, the receive loop and
the check run in C (`cio`, workers/cio.py), and `receive_cycle` is a whole wake-up for one
compiled core (receive, the core's work, its sends) in one C call; the Python check still
judges every datagram C's fast check declines, in order.
"""
from __future__ import annotations

import errno
import ipaddress
import select
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from netsum.wire import HEADER_BYTES, K_DEFAULT, K_SUPPORTED, UDP_PORT
from netsum import udpgso
from netsum.workers import mmsg, wire
from netsum.workers.cio import CIo, CycleMany
from netsum.workers.errors import TransportError, WireError

if TYPE_CHECKING:
    from netsum.workers.native import NativeCore

__all__ = ["Transport", "BatchTransport", "TransportCounters", "UdpTransport", "FrameTransport",
           "parse_hostport"]

_DRAIN = 256            # datagrams read per receive() call at most
_ROW = 2048             # bytes per receive row at least: more than a K<=256 frame (1090)
_SOCKBUF = 4 << 20      # bytes; a window of a few thousand packets must not overflow the kernel
#: IPv4 (no options) + UDP header bytes before the netsum packet.
IP_UDP_BYTES = 20 + 8
# Linux <netinet/in.h>: IP_MTU_DISCOVER = 10, IP_PMTUDISC_DO = 2 (never fragment), IP_MTU = 14.
_IP_MTU_DISCOVER, _IP_PMTUDISC_DO, _IP_MTU = 10, 2, 14
_SEND_WAIT = 0.5        # seconds to wait for room in a full send buffer before dropping


class Transport(Protocol):
    """What `allreduce` needs from a transport."""

    def send(self, payloads: Iterable[bytes]) -> None: ...

    def receive(self, timeout: float) -> list[bytes]: ...

    def close(self) -> None: ...


@runtime_checkable
class BatchTransport(Transport, Protocol):
    """A transport with the allocation-free hot path (see the module docstring)."""

    frame_prefix: bytes
    rx_payloads: list[memoryview]
    rx_other: list[bytes]

    def send_frames(self, frames: Sequence[memoryview], slots: Sequence[int]) -> None: ...

    def receive_into(self, timeout: float, size: int) -> int: ...


@dataclass(slots=True)
class TransportCounters:
    sent: int = 0
    received: int = 0
    send_dropped: int = 0   # the kernel had no room even after waiting; the core retransmits
    malformed: int = 0      # frames that failed validation (FrameTransport)
    foreign: int = 0        # valid frames not addressed to this worker, or not netsum
    last_error: str = ""


def parse_hostport(text: str, default_port: int | None = None) -> tuple[str, int]:
    """'10.0.0.1:28275' or (with a default port) '10.0.0.1' -> ('10.0.0.1', 28275)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, ""
    if not port:
        if default_port is None:
            raise ValueError(f"{text!r} is not HOST:PORT")
        port = str(default_port)
    try:
        ipaddress.IPv4Address(host)
        number = int(port)
    except ValueError:
        raise ValueError(f"{text!r} is not IPV4:PORT") from None
    if not 0 <= number < 65536:
        raise ValueError(f"{text!r}: port {number} out of range")
    return host, number


class _Socket:
    """One non-blocking UDP socket with batched receive and bounded-wait send."""

    def __init__(self, bind: tuple[str, int], peer: tuple[str, int] | None = None) -> None:
        """`peer`: connect the socket to it, so that the kernel drops datagrams from any
        other address or port (a worker takes results from its switch only)."""
        self.counters = TransportCounters()
        try:
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        except OSError as exc:
            raise TransportError(f"cannot open a UDP socket: {exc.strerror}") from None
        try:
            for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                self._sock.setsockopt(socket.SOL_SOCKET, opt, _SOCKBUF)
            self._sock.bind(bind)
        except OSError as exc:
            self._sock.close()
            raise TransportError(f"cannot bind UDP {bind[0]}:{bind[1]}: {exc.strerror}") \
                from None
        if peer is not None:
            try:
                self._sock.connect(peer)
            except OSError as exc:
                self._sock.close()
                raise TransportError(f"cannot connect UDP to {peer[0]}:{peer[1]}: "
                                     f"{exc.strerror}") from None
        self._sock.setblocking(False)
        self._mmsg: mmsg.MmsgSocket | None = None
        self._mmsg_rows: list[memoryview] | None = None
        #: the receive and send loops in C (workers/cio.py), once rows are attached
        self.cio: CIo | None = None
        #: UDP_GRO is on (the C loops asked for it): a read may give several datagrams
        self._gro = False

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._sock.getsockname()[:2]
        return host, port

    def fit_route(self, size: int, k: int) -> None:
        """A connected socket's datagrams of `size` IP bytes (K values each) must fit the
        route's MTU whole: the switch drops IP fragments (docs/protocol.md), so a K whose
        datagrams exceed the link MTU (K > 256 on a 1500-byte link) would be lost without a
        word.  Refused here with the numbers; the kernel also sets DF from now on, so a route
        whose MTU shrinks later fails the send (EMSGSIZE) rather than fragments."""
        try:
            self._sock.setsockopt(socket.IPPROTO_IP, _IP_MTU_DISCOVER, _IP_PMTUDISC_DO)
            mtu = self._sock.getsockopt(socket.IPPROTO_IP, _IP_MTU)
        except OSError:
            return          # not Linux, or not connected: nothing to ask
        if size > mtu:
            peer = self._sock.getpeername()
            raise TransportError(
                f"K={k} datagrams are {size} bytes of IP, more than the {mtu}-byte MTU of the "
                f"route to {peer[0]} (the switch drops fragments): raise the link's MTU (e.g. "
                f"`ip link set DEV mtu 9000` on both ends) or use K <= "
                f"{max(x for x in K_SUPPORTED if IP_UDP_BYTES + HEADER_BYTES + 4 * x <= mtu)}")

    def sendto(self, data: bytes | memoryview, dest: tuple[str, int]) -> None:
        try:
            self._sock.sendto(data, dest)
        except (BlockingIOError, InterruptedError):
            select.select([], [self._sock], [], _SEND_WAIT)
            try:
                self._sock.sendto(data, dest)
            except (BlockingIOError, InterruptedError):
                self.counters.send_dropped += 1
                return
        except OSError as exc:
            if exc.errno in (errno.ENOBUFS, errno.ECONNREFUSED):
                self.counters.send_dropped += 1  # transient: loss the core recovers from
                return
            raise TransportError(f"sending to {dest[0]}:{dest[1]}: {exc.strerror}") from None
        self.counters.sent += 1

    def attach_rows(self, rows: list[memoryview]) -> None:
        """The receive rows `recv_rows` will be given: with recvmmsg/sendmmsg available
        (workers/mmsg.py), their addresses are set up once for the batched calls."""
        self._mmsg = mmsg.MmsgSocket.create(self._sock, rows, _DRAIN)
        self._mmsg_rows = rows if self._mmsg is not None else None

    def attach_cio(self, rx: _Rows, skip: int, frame: int, headlen: int,
                   dest: tuple[str, int]) -> None:
        """The C loops over `rx` (attached by attach_rows): where recvmmsg/sendmmsg are used
        and the compiled module is here (workers/cio.py)."""
        if self.cio is not None:
            self.cio.close()
            self.cio = None
        if self._mmsg is not None and self._mmsg_rows is rx.rows:
            self.cio = CIo.udp(self._sock, rx.buf, rx.rows, rx.width, skip, frame, headlen, dest,
                               self.counters)
        gro = self.cio is not None and self.cio.gro
        if self._gro and not gro:       # the Python loops read one datagram at a time
            self._sock.setsockopt(udpgso.SOL_UDP, udpgso.UDP_GRO, 0)
        self._gro = gro

    @property
    def syscalls(self) -> str:
        """Which system calls move the hot path's datagrams, and why not the batched ones."""
        if self._mmsg is not None:
            return "recvmmsg/sendmmsg" + (" (from C)" if self.cio is not None else "")
        why = mmsg.unavailable_reason()
        return "recv_into/sendto" + (f" ({why})" if why else "")

    def send_rows(self, rows: Sequence[memoryview], slots: Sequence[int],
                  dest: tuple[str, int]) -> None:
        mm = self._mmsg
        if mm is not None:
            at, sent, count = 0, 0, len(slots)
            while at < count:
                got = mm.send(rows, slots, at, dest)
                if got:
                    at += got
                    sent += got
                else:       # a copy, or the kernel took none: alone, waiting or counting
                    self.sendto(rows[slots[at]], dest)
                    at += 1
            self.counters.sent += sent
            return
        sendto = self._sock.sendto
        sent = 0
        for i in slots:
            try:
                sendto(rows[i], dest)
                sent += 1
            except OSError:
                self.sendto(rows[i], dest)   # waits for room or counts the drop
        self.counters.sent += sent

    def recv_rows(self, rows: list[memoryview], timeout: float,
                  check: Callable[[int, int], bool]) -> int:
        """Datagrams into rows[0], rows[1], ... (at most _DRAIN read): `check(row, length)`
        says whether row `row` now holds a packet to deliver (it keeps the row) or not (the
        next datagram overwrites it).  Waits up to `timeout` only when nothing is queued."""
        cio = self.cio
        if cio is not None and rows is cio.rows:
            return cio.recv(timeout, check)
        if self._mmsg is not None and rows is self._mmsg_rows:
            return self._recv_batch(rows, timeout, check)
        recv_into, n, got, waited = self._sock.recv_into, 0, 0, timeout <= 0
        while got < _DRAIN and n < len(rows):
            try:
                length = recv_into(rows[n], 0, socket.MSG_TRUNC)   # the datagram's own length
            except (BlockingIOError, InterruptedError):
                if n or got or waited:
                    break
                waited = True
                if not select.select([self._sock], [], [], timeout)[0]:
                    break
                continue
            except ConnectionRefusedError:
                continue  # an earlier datagram's ICMP unreachable; nothing to read
            except OSError as exc:
                raise TransportError(f"receiving: {exc.strerror}") from None
            got += 1
            if check(n, length):
                n += 1
        self.counters.received += got
        return n

    def _recv_batch(self, rows: list[memoryview], timeout: float,
                    check: Callable[[int, int], bool]) -> int:
        """recv_rows with recvmmsg: datagram j lands in row j, and the socket is read again
        until it is empty or the rows are full, as the one-at-a-time loop drains what arrives
        meanwhile (fewer, larger batches are what the core's per-batch costs want).  A row
        `check` declines is filled by moving the later rows down (rare: foreign or bad
        datagrams)."""
        assert self._mmsg is not None
        waited = timeout <= 0
        lengths: list[int] = []
        while len(lengths) < min(_DRAIN, len(rows)):
            try:
                got = self._mmsg.recv(len(lengths), _DRAIN - len(lengths))
            except ConnectionRefusedError:
                continue  # an earlier datagram's ICMP unreachable; nothing to read
            except OSError as exc:
                raise TransportError(f"receiving: {exc.strerror}") from None
            if got:
                lengths += got
                continue
            if lengths or waited:
                break
            waited = True
            if not select.select([self._sock], [], [], timeout)[0]:
                break
        n = 0
        for j, length in enumerate(lengths):
            if n != j:
                rows[n][:] = rows[j]
            if check(n, length):
                n += 1
        self.counters.received += len(lengths)
        return n

    def recv_many(self, timeout: float) -> list[bytes]:
        if timeout > 0:
            ready, _, _ = select.select([self._sock], [], [], timeout)
            if not ready:
                return []
        out: list[bytes] = []
        for _ in range(_DRAIN):
            if len(out) >= _DRAIN:
                break
            if self._gro:               # a buffer may hold several datagrams: split it
                try:
                    data, anc, _fl, _a = self._sock.recvmsg(65535, 64)
                except (BlockingIOError, InterruptedError):
                    break
                except ConnectionRefusedError:
                    continue
                except OSError as exc:
                    raise TransportError(f"receiving: {exc.strerror}") from None
                out += [data[o:o + n] for o, n in udpgso.split(len(data),
                                                              udpgso.segment_size(anc))]
                continue
            try:
                out.append(self._sock.recv(65535))
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionRefusedError:
                continue  # an earlier datagram's ICMP unreachable; nothing to read
            except OSError as exc:
                raise TransportError(f"receiving: {exc.strerror}") from None
        self.counters.received += len(out)
        return out

    def close(self) -> None:
        if self.cio is not None:
            self.cio.close()
            self.cio = None
        self._sock.close()


class _Rows:
    """`count` receive rows of `width` bytes in one buffer (_ROW, or the frame rounded up to 64
    bytes where K > 256 makes it longer); `payloads[j]`: the `size` bytes at `skip` in row j
    (where a valid datagram's netsum packet lies).  A datagram longer than a row is cut at it
    (its length is still known: MSG_TRUNC), so every frame of the transport's K fits whole."""

    def __init__(self, count: int, skip: int, size: int) -> None:
        self.width = w = max(_ROW, -(-(skip + size) // 64) * 64)
        self.buf = bytearray(count * w)
        mv = memoryview(self.buf)
        self.rows = [mv[j * w:(j + 1) * w] for j in range(count)]
        self.payloads = [mv[j * w + skip:j * w + skip + size] for j in range(count)]
        self.size = size


class UdpTransport:
    """Kernel UDP to the aggregation service.  Bind the port the controller installed for this
    worker (results come back to it); default UDP_PORT on all addresses of the host.  The
    socket is connected to `service`: the kernel hands it datagrams from there only, so a
    forged result from any other address or port never reaches the worker."""

    frame_prefix = b""   # the kernel builds the frame

    def __init__(self, service: tuple[str, int],
                 bind: tuple[str, int] = ("0.0.0.0", UDP_PORT),
                 k: int | None = None) -> None:
        self.service = service
        self._sock = _Socket(bind, peer=service)
        if k is not None:
            try:
                self._sock.fit_route(IP_UDP_BYTES + HEADER_BYTES + 4 * wire.check_k(k), k)
            except BaseException:
                self._sock.close()
                raise
        self._rx: _Rows | None = None
        self.rx_payloads: list[memoryview] = []
        self.rx_other: list[bytes] = []

    @property
    def address(self) -> tuple[str, int]:
        return self._sock.address

    @property
    def counters(self) -> TransportCounters:
        return self._sock.counters

    @property
    def syscalls(self) -> str:
        """The hot path's system calls (batched where available; why not, otherwise)."""
        return self._sock.syscalls

    def send(self, payloads: Iterable[bytes]) -> None:
        for p in payloads:
            self._sock.sendto(p, self.service)

    def receive(self, timeout: float) -> list[bytes]:
        return self._sock.recv_many(timeout)

    def send_frames(self, frames: Sequence[memoryview], slots: Sequence[int]) -> None:
        self._sock.send_rows(frames, slots, self.service)

    def receive_into(self, timeout: float, size: int) -> int:
        """Payloads of exactly `size` bytes into rx_payloads[0:n]; other datagrams go to
        rx_other whole, for the core to reject with the reason (what `receive` returns)."""
        return self._sock.recv_rows(self._rows_for(size).rows, timeout, self._checker(size))

    def _rows_for(self, size: int) -> _Rows:
        if self._rx is None or self._rx.size != size:
            self._rx = _Rows(_DRAIN, 0, size)
            self.rx_payloads = self._rx.payloads
            self._sock.attach_rows(self._rx.rows)
            self._sock.attach_cio(self._rx, 0, size, 0, self.service)
        return self._rx

    @property
    def cio(self) -> CIo | None:
        """The C I/O loops (workers/cio.py), once the receive rows are cut."""
        return self._sock.cio

    def receive_cycle(self, core: NativeCore, timeout: float, clock: Callable[[], float],
                      job: int) -> tuple[int, int]:
        """One wake-up for one compiled core in C (CIo.cycle); rows cut for its packets."""
        cio = self._sock.cio
        assert cio is not None and self._rx is not None
        return cio.cycle(core, timeout, clock, job, self._checker(self._rx.size),
                         self.send_frames, self.rx_payloads)

    def receive_cycle_many(self, cores: Sequence[NativeCore], quiet: tuple[int, ...],
                           timeout: float, clock: Callable[[], float]) -> CycleMany:
        """One wake-up for several compiled cores in C (CIo.cycle_many)."""
        cio = self._sock.cio
        assert cio is not None and self._rx is not None
        return cio.cycle_many(cores, quiet, timeout, clock, self._checker(self._rx.size),
                              self.send_frames)

    def _checker(self, size: int) -> Callable[[int, int], bool]:
        assert self._rx is not None
        rows, other, width = self._rx.rows, self.rx_other, self._rx.width

        def check(j: int, length: int) -> bool:
            if length == size:
                return True
            if length <= width:
                other.append(bytes(rows[j][:length]))
            else:   # cut at the row: its length (all the core's verdict needs) is kept
                other.append(bytes(rows[j]).ljust(length, b"\0"))
            return False
        return check

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> UdpTransport:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class FrameTransport:
    """Whole Ethernet frames over UDP to an embedded switch port (no privileges needed).
    `local` is this worker's MAC/IPv4/UDP port as the controller knows it (membership is keyed
    on the IPv4 source); `service` is the switch's aggregation service address."""

    def __init__(self, switch_port: tuple[str, int], local: wire.Endpoint,
                 service: wire.Endpoint, bind: tuple[str, int] = ("127.0.0.1", 0),
                 k: int = K_DEFAULT) -> None:
        self.switch_port = switch_port
        self.local = local
        self.service = service
        self.k = wire.check_k(k)
        self._prefix = wire.FramePrefix.build(local, service, HEADER_BYTES + 4 * k).data
        #: what every frame the core builds for this transport starts with
        self.frame_prefix = self._prefix
        self._sock = _Socket(bind)
        self._size = HEADER_BYTES + 4 * k
        self._frame = len(self._prefix) + self._size
        self._rx = _Rows(_DRAIN, len(self._prefix), self._size)
        self.rx_payloads = self._rx.payloads
        self._sock.attach_rows(self._rx.rows)
        self.rx_other: list[bytes] = []
        # The first bytes of a frame, up to and with the netsum flags, decide every check of
        # wire.netsum_payload for a frame of the one valid length: one that passed them
        # lets the next frames with the same bytes through by one comparison.
        self._head = len(self._prefix) + 1 + max(wire.field_offset("msg_type"),
                                                 wire.field_offset("flags"))
        self._heads = [row[:self._head] for row in self._rx.rows]
        self._good = b""
        self._sock.attach_cio(self._rx, len(self._prefix), self._frame, self._head,
                              switch_port)

    @property
    def cio(self) -> CIo | None:
        """The C I/O loops (workers/cio.py), where they run."""
        return self._sock.cio

    def receive_cycle(self, core: NativeCore, timeout: float, clock: Callable[[], float],
                      job: int) -> tuple[int, int]:
        """One wake-up for one compiled core in C (CIo.cycle)."""
        cio = self._sock.cio
        assert cio is not None
        return cio.cycle(core, timeout, clock, job, self._checker(), self.send_frames,
                         self.rx_payloads)

    def receive_cycle_many(self, cores: Sequence[NativeCore], quiet: tuple[int, ...],
                           timeout: float, clock: Callable[[], float]) -> CycleMany:
        """One wake-up for several compiled cores in C (CIo.cycle_many)."""
        cio = self._sock.cio
        assert cio is not None
        return cio.cycle_many(cores, quiet, timeout, clock, self._checker(), self.send_frames)

    @property
    def address(self) -> tuple[str, int]:
        return self._sock.address

    @property
    def counters(self) -> TransportCounters:
        return self._sock.counters

    @property
    def syscalls(self) -> str:
        """The hot path's system calls (batched where available; why not, otherwise)."""
        return self._sock.syscalls

    def send(self, payloads: Iterable[bytes]) -> None:
        prefix = self._prefix
        for p in payloads:
            self._sock.sendto(prefix + p, self.switch_port)

    def send_frames(self, frames: Sequence[memoryview], slots: Sequence[int]) -> None:
        """Frames that start with `frame_prefix` (the core's rows), as they are."""
        self._sock.send_rows(frames, slots, self.switch_port)

    def receive_into(self, timeout: float, size: int) -> int:
        """Netsum payloads of frames that pass wire.netsum_payload into rx_payloads[0:n] (in
        place: the frame stays in its row); frames that parse_frame accepts otherwise go to
        rx_other as payloads; the rest is counted as `receive` counts it."""
        if size != self._size:
            raise ValueError(f"this transport carries {self._size}-byte payloads, not {size}")
        return self._sock.recv_rows(self._rx.rows, timeout, self._checker())

    def _checker(self) -> Callable[[int, int], bool]:
        rows, heads, frame = self._rx.rows, self._heads, self._frame

        def check(j: int, length: int) -> bool:
            if length == frame and heads[j] == self._good:
                return True
            return self._check_slow(rows[j], length)
        return check

    def _check_slow(self, row: memoryview, length: int) -> bool:
        c = self._sock.counters
        if length > self._rx.width:
            c.malformed += 1
            c.last_error = f"frame of {length} bytes: longer than a netsum frame of K={self.k}"
            return False
        frame = bytes(row[:length])
        if wire.netsum_payload(frame, self.k, self.local, self.service) is not None:
            self._good = frame[:self._head]
            return True
        payload = self._parse(frame)
        if payload is not None:
            self.rx_other.append(payload)
        return False

    def _parse(self, frame: bytes) -> bytes | None:
        """The full path for a frame the fast check declined: its payload, or None counted."""
        c = self._sock.counters
        # ARP, flooded frames and other traffic of the emulated LAN reach this port too.
        if len(frame) < 14 or frame[12:14] != b"\x08\x00":
            c.foreign += 1
            return None
        try:
            parsed = wire.parse_frame(frame, self.k)
        except WireError as exc:
            c.malformed += 1
            c.last_error = str(exc)
            return None
        try:
            wire.check_peers(parsed, self.local, self.service)
        except WireError as exc:
            c.foreign += 1      # not from this worker's switch, or not for this worker
            c.last_error = str(exc)
            return None
        return parsed.payload

    def receive(self, timeout: float) -> list[bytes]:
        out = []
        fast, k, local, service = wire.netsum_payload, self.k, self.local, self.service
        for frame in self._sock.recv_many(timeout):
            payload = fast(frame, k, local, service)
            if payload is None:          # not the common case: the full path
                payload = self._parse(frame)
            if payload is not None:
                out.append(payload)
        return out

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> FrameTransport:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
