"""Transports: thin socket shells that move netsum payloads for the worker core.

* `UdpTransport` - kernel UDP: the worker binds its own IP:port and sends to the aggregation
  service address:UDP_PORT (inside a network namespace or Mininet host, real IP stack).
* `FrameTransport` - unprivileged: the worker builds whole Ethernet/IPv4/UDP frames itself
  (its own MAC/IPv4) and sends each as one UDP datagram to an embedded switch port on
  127.0.0.1 (`netsum-switch -i N@udp:127.0.0.1:PORT=PEER`, where PEER is the address this
  transport binds: the switch takes datagrams from its port's peer only); frames coming back
  are parsed and validated, and only their netsum payloads are handed on.

Both keep one socket open and send prebuilt bytes (the frame prefix is computed once).  Both
are non-blocking; `receive(timeout)` waits up to `timeout` and drains what is queued.
"""
from __future__ import annotations

import errno
import ipaddress
import select
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from wireformat import HEADER_BYTES, K_DEFAULT, UDP_PORT
from workers import wire
from workers.errors import TransportError, WireError

__all__ = ["Transport", "TransportCounters", "UdpTransport", "FrameTransport", "parse_hostport"]

_DRAIN = 256            # datagrams read per receive() call at most
_SOCKBUF = 4 << 20      # bytes; a window of a few thousand packets must not overflow the kernel
_SEND_WAIT = 0.5        # seconds to wait for room in a full send buffer before dropping


class Transport(Protocol):
    """What `allreduce` needs from a transport."""

    def send(self, payloads: Iterable[bytes]) -> None: ...

    def receive(self, timeout: float) -> list[bytes]: ...

    def close(self) -> None: ...


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

    def __init__(self, bind: tuple[str, int]) -> None:
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
        self._sock.setblocking(False)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._sock.getsockname()[:2]
        return host, port

    def sendto(self, data: bytes, dest: tuple[str, int]) -> None:
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

    def recv_many(self, timeout: float) -> list[bytes]:
        if timeout > 0:
            ready, _, _ = select.select([self._sock], [], [], timeout)
            if not ready:
                return []
        out = []
        for _ in range(_DRAIN):
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
        self._sock.close()


class UdpTransport:
    """Kernel UDP to the aggregation service.  Bind the port the controller installed for this
    worker (results come back to it); default UDP_PORT on all addresses of the host."""

    def __init__(self, service: tuple[str, int],
                 bind: tuple[str, int] = ("0.0.0.0", UDP_PORT)) -> None:
        self.service = service
        self._sock = _Socket(bind)

    @property
    def address(self) -> tuple[str, int]:
        return self._sock.address

    @property
    def counters(self) -> TransportCounters:
        return self._sock.counters

    def send(self, payloads: Iterable[bytes]) -> None:
        for p in payloads:
            self._sock.sendto(p, self.service)

    def receive(self, timeout: float) -> list[bytes]:
        return self._sock.recv_many(timeout)

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
                 k: int = K_DEFAULT, strict_dst: bool = True) -> None:
        self.switch_port = switch_port
        self.local = local
        self.k = wire.check_k(k)
        self.strict_dst = strict_dst
        self._prefix = wire.FramePrefix.build(local, service, HEADER_BYTES + 4 * k).data
        self._sock = _Socket(bind)

    @property
    def address(self) -> tuple[str, int]:
        return self._sock.address

    @property
    def counters(self) -> TransportCounters:
        return self._sock.counters

    def send(self, payloads: Iterable[bytes]) -> None:
        prefix = self._prefix
        for p in payloads:
            self._sock.sendto(prefix + p, self.switch_port)

    def receive(self, timeout: float) -> list[bytes]:
        out = []
        c = self._sock.counters
        fast, k = wire.netsum_payload, self.k
        dst = self.local.ip if self.strict_dst else None
        for frame in self._sock.recv_many(timeout):
            payload = fast(frame, k, dst)
            if payload is not None:      # the common case, validated as parse_frame would
                out.append(payload)
                continue
            # ARP, flooded frames and other traffic of the emulated LAN reach this port too.
            if len(frame) < 14 or frame[12:14] != b"\x08\x00":
                c.foreign += 1
                continue
            try:
                parsed = wire.parse_frame(frame, self.k)
            except WireError as exc:
                c.malformed += 1
                c.last_error = str(exc)
                continue
            if self.strict_dst and parsed.dst.ip != self.local.ip:
                c.foreign += 1
                continue
            out.append(parsed.payload)
        return out

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> FrameTransport:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
