"""Batched datagram syscalls for the worker's socket: Linux `recvmmsg(2)` / `sendmmsg(2)`
called through ctypes (the standard library has neither; ctypes needs no compiler).

One `recvmmsg` moves every queued datagram (up to the batch's rows) into preallocated rows of
one buffer and reports each one's length; one `sendmmsg` sends every frame a call of the worker
core queued, each straight from its row of the core's window buffer.  A system call costs
about a microsecond of entry, exit and Python call overhead on top of the kernel's per-datagram
work, and the worker otherwise pays it twice per packet.

`MmsgSocket.create` returns None where the calls are not available (not Linux, a libc without
them, or NETSUM_MMSG=0 in the environment, which benchmarks and tests use to measure and run the
portable path: `recv_into`/`sendto` one datagram at a time); `unavailable_reason()` says why.
"""
from __future__ import annotations

import ctypes
import errno
import os
import socket
import sys
from collections.abc import Sequence

__all__ = ["MmsgSocket", "unavailable_reason", "enable", "ENV"]

ENV = "NETSUM_MMSG"
_MSG_DONTWAIT = 0x40
_MSG_TRUNC = 0x20


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
                ("msg_iov", ctypes.c_void_p), ("msg_iovlen", ctypes.c_size_t),
                ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
                ("msg_flags", ctypes.c_int)]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _MsgHdr), ("msg_len", ctypes.c_uint)]


_MMSG_SIZE = ctypes.sizeof(_MMsgHdr)


def _load(wanted: bool) -> tuple[object, object] | str:
    """(recvmmsg, sendmmsg) of the C library, or why they cannot be used."""
    if not wanted:
        return f"{ENV}=0" if os.environ.get(ENV, "1") == "0" else "turned off"
    if not sys.platform.startswith("linux"):
        return f"not Linux ({sys.platform})"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        recv, send = libc.recvmmsg, libc.sendmmsg
    except (OSError, AttributeError) as exc:
        return f"no recvmmsg/sendmmsg in the C library ({exc})"
    recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                     ctypes.c_void_p]
    send.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    recv.restype = send.restype = ctypes.c_int
    return recv, send


_CALLS = _load(os.environ.get(ENV, "1") != "0")


def enable(on: bool) -> None:
    """Use the batched calls (where available) for sockets set up from now on, or the
    portable path: what NETSUM_MMSG does, switchable within one process (benchmarks measure
    both side by side, tests run both)."""
    global _CALLS
    _CALLS = _load(on)


def unavailable_reason() -> str | None:
    """None when the batched calls are used, else the reason the portable path is."""
    return _CALLS if isinstance(_CALLS, str) else None


_KNOWN = 8       # frame lists whose addresses are kept (more than the lanes of a rank)


def _address(buf: memoryview) -> int | None:
    """Address of a writable buffer's first byte (None: read-only, e.g. a copy in bytes)."""
    if buf.readonly or not buf.contiguous or not len(buf):
        return None
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def _sockaddr_in(host: str, port: int) -> ctypes.Array[ctypes.c_char]:
    """struct sockaddr_in: family in host byte order (Linux), port and address in network."""
    raw = socket.AF_INET.to_bytes(2, sys.byteorder) + port.to_bytes(2, "big") + \
        socket.inet_aton(host) + bytes(8)
    return ctypes.create_string_buffer(raw, len(raw))


class MmsgSocket:
    """recvmmsg into `rows` (rows of one writable buffer) and sendmmsg of frames, on `sock`
    (non-blocking).  At most `batch` datagrams per call either way."""

    def __init__(self, sock: socket.socket, rows: Sequence[memoryview], batch: int,
                 calls: tuple[object, object]) -> None:
        self._sock = sock
        self._fd = sock.fileno()
        self._recv, self._send = calls
        self._n = n = max(batch, len(rows))
        self._rx_iov = (_IoVec * n)()
        self._rx = (_MMsgHdr * n)()
        self._rx_ptr = ctypes.addressof(self._rx)
        self._keep = list(rows)        # the rows' buffers stay alive while their address is used
        for j, row in enumerate(rows):
            addr = _address(row)
            if addr is None:
                raise ValueError("receive rows must be writable contiguous buffers")
            self._rx_iov[j].iov_base = addr
            self._rx_iov[j].iov_len = len(row)
            self._rx[j].msg_hdr.msg_iov = ctypes.addressof(self._rx_iov[j])
            self._rx[j].msg_hdr.msg_iovlen = 1
        self._rows = len(rows)
        self._tx_iov = (_IoVec * n)()
        self._tx = (_MMsgHdr * n)()
        self._tx_ptr = ctypes.addressof(self._tx)
        for j in range(n):
            self._tx[j].msg_hdr.msg_iov = ctypes.addressof(self._tx_iov[j])
            self._tx[j].msg_hdr.msg_iovlen = 1
        self._dest: tuple[str, int] | None = None
        self._name: ctypes.Array[ctypes.c_char] | None = None
        # Addresses and lengths of the frames of the last `frames` list sent from (the core's
        # window: its rows never move; copies appended later are read-only and sent alone),
        # and of the few lists sent from before it: the training lanes send from one window
        # per busy lane in turn, and finding a window's addresses costs ~1 us a row.  The
        # lists are kept alive here, so an id in `_known` is never another list's.
        self._frames: Sequence[memoryview] | None = None
        self._addrs: list[int | None] = []
        self._lens: list[int] = []
        self._known: dict[int, tuple[Sequence[memoryview], list[int | None], list[int]]] = {}

    @classmethod
    def create(cls, sock: socket.socket, rows: Sequence[memoryview],
               batch: int) -> MmsgSocket | None:
        if isinstance(_CALLS, str):
            return None
        return cls(sock, rows, batch, _CALLS)

    def recv(self, start: int, limit: int) -> list[int]:
        """Datagrams into rows start, start + 1, ... (at most `limit`): their lengths (a
        datagram longer than its row is cut at the row; its length is the datagram's own).
        [] when none is queued; OSError for a socket error (ECONNREFUSED: an earlier
        datagram's ICMP)."""
        count = min(limit, self._rows - start)
        if count <= 0:
            return []
        m = self._recv(self._fd, self._rx_ptr + start * _MMSG_SIZE,  # type: ignore[operator]
                       count, _MSG_DONTWAIT | _MSG_TRUNC, None)
        if m < 0:
            err = ctypes.get_errno()
            if err in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR):
                return []
            raise OSError(err, os.strerror(err))
        rx = self._rx
        return [rx[j].msg_len for j in range(start, start + m)]

    def _point(self, frames: Sequence[memoryview]) -> None:
        known = self._known
        got = known.pop(id(frames), None)
        if got is None or len(got[2]) != len(frames):   # new, or grown since (new rows)
            got = (frames, [_address(f) for f in frames], [len(f) for f in frames])
            while len(known) >= _KNOWN:
                del known[next(iter(known))]      # the least recently sent from
        known[id(frames)] = got
        self._frames, self._addrs, self._lens = got

    def send(self, frames: Sequence[memoryview], slots: Sequence[int], at: int,
             dest: tuple[str, int]) -> int:
        """frames[i] for i in slots[at:] to `dest` with one sendmmsg, as far as they are rows
        of one writable buffer (a copy in bytes ends the run): how many the kernel took, 0
        when it took none or slots[at] is a copy (the caller sends that one alone)."""
        if dest != self._dest:
            self._dest, self._name = dest, _sockaddr_in(*dest)
            name = ctypes.addressof(self._name)
            for j in range(self._n):
                self._tx[j].msg_hdr.msg_name = name
                self._tx[j].msg_hdr.msg_namelen = 16
        if frames is not self._frames:
            self._point(frames)
        addrs, lens, iov = self._addrs, self._lens, self._tx_iov
        known = len(addrs)
        end = min(len(slots), at + self._n)
        m = 0
        for i in slots[at:end]:
            addr = addrs[i] if i < known else None
            if addr is None:
                break
            v = iov[m]
            v.iov_base = addr
            v.iov_len = lens[i]
            m += 1
        if m == 0:
            return 0
        got = self._send(self._fd, self._tx_ptr, m, _MSG_DONTWAIT)  # type: ignore[operator]
        return got if got > 0 else 0
