"""Shared-memory packet rings between one switch port and its one peer (memif-style).

Owns the one definition of the ring format and its Python endpoints, used by the switch's
shared-memory ports (netsum/switch/ports.py; the C port loop, netsum/switch/native/ioloop.c,
gets every offset from `Layout`) and by the workers' ring transport (netsum/workers/shmring.py;
its C loops, workers/wio.c, get theirs from `Layout` too and keep the trust rules below).
It imports nothing of the project: the switch and the workers stay ignorant of each other.

A port `N@shm:PATH` is a Unix stream socket at PATH (mode 0600) that the switch listens on.
The one peer connects and receives, in one message, a line `NSUMRING 1 slots=S frame=F
size=B port=N` and three file descriptors: the region (a memfd sealed against shrinking and
growing, so no peer can make the switch's accesses fault), the switch's doorbell and the
peer's doorbell (eventfds).  The connection stays open: it is the peer's claim on the port
(a second peer is refused with `NSUMRING busy pid=P`) and its end tells the switch the peer
is gone.  A new peer starts by dropping what the old one left unread.

Region (u32 fields in the machine's byte order; every offset from `Layout`):

    0       "NSUMRING", version, slots, frame                      (written once by the switch)
    256     ring 0 control (peer -> switch): head @+0, tail @+64, wake @+128 (own cache lines)
    768     ring 1 control (switch -> peer)
    4096    ring 0 descriptors: slots x (u32 offset from the region's start, u32 length)
    ...     ring 1 descriptors
    ...     ring 0 buffers (slots x frame bytes), then ring 1 buffers

head and tail are free-running u32 counters (a ring holds head - tail frames, never more
than slots); the producer alone writes head and the descriptors and buffers between tail and
head, the consumer alone writes tail and wake.  Descriptor i sits at index i & (slots - 1).
A producer may point a descriptor anywhere in its own ring's buffer area (the switch's
producer uses buffer i for descriptor i).

Trust: the peer can write every byte of the region at any time.  So a consumer reads each
descriptor once, checks it (offset and length inside its ring's buffer area, else counted
`bad_desc` and skipped; a length of 0 is an empty frame, as a UDP datagram may be empty)
and copies the frame out before anything looks at it; a head more than `slots` ahead of the
tail is counted `bad_index` and the ring is resynchronised (tail := head, what it claimed
to hold is dropped); the switch keeps its own copy of the layout and
never reads sizes back from the region.  A hostile peer can so do nothing that it could not
do by sending frames.  Every process of the switch's user can connect (the socket's mode):
for isolation between users of one machine use UDP or veth ports.

Waiting (an optional spin, then the doorbell): a consumer about to sleep sets wake = 1, issues a
full fence and looks at head once more; a producer publishes head, issues a full fence and
rings the doorbell only when wake is 1.  (The fences make the two store-then-load sequences
safe against each other: without them either side could read the other's old value and both
would wait.)  Python has no fence of its own: `fence()` calls libatomic's
atomic_thread_fence (ctypes); on machines that order stores and loads less strictly than
x86-64 the acquire/release points get that fence too.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import platform
import select
import socket
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Layout", "Producer", "Consumer", "ShmError", "ShmServer", "ShmPeer", "attach",
           "fence", "DEFAULT_SLOTS", "DEFAULT_FRAME", "TO_SWITCH", "TO_PEER", "HEAD", "TAIL",
           "WAKE", "MAGIC", "VERSION", "spin_seconds", "frame_for"]

MAGIC = b"NSUMRING"
VERSION = 1
HEADER = 4096
CTRL, CTRL_STRIDE = 256, 512
HEAD, TAIL, WAKE = 0, 64, 128          # within a ring's control block: one cache line each
DESC = 8                               # bytes per descriptor: u32 offset, u32 length
TO_SWITCH, TO_PEER = 0, 1              # ring numbers
DEFAULT_SLOTS = 512                    # > a worker's 256-slot window, results and retries
DEFAULT_FRAME = 2048                   # > 1082, the K=256 frame; < 2 pages
MAX_SLOTS = 1 << 16
MAX_FRAME = 1 << 16
_U32 = 0xFFFFFFFF
_SPIN_ENV = "NETSUM_SHM_SPIN_US"
_DEFAULT_SPIN_US = 0
# x86 keeps loads and stores in order except a store before a later load (TSO): acquire and
# release are free there, only the wake-flag handshake needs the full fence.
_TSO = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


class ShmError(OSError):
    """A shared-memory port could not be created or attached; str() is one line."""


def _load_fence() -> Callable[[], None] | None:
    try:
        lib = ctypes.CDLL("libatomic.so.1")
        fn = lib.atomic_thread_fence
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = None
    seq_cst = 5                                 # memory_order_seq_cst

    def full_fence() -> None:
        fn(seq_cst)
    return full_fence


_FENCE = _load_fence()


def fence() -> None:
    """A full memory fence (seq_cst); ShmError when this machine has no libatomic."""
    if _FENCE is None:
        raise ShmError("shared-memory rings need libatomic.so.1 (Debian: libatomic1) for a "
                       "memory fence")
    _FENCE()


def _no_fence() -> None:
    pass


_ORDER = _no_fence if _TSO else fence      # acquire/release points


def spin_seconds() -> float:
    """How long a consumer polls its ring before it sleeps on the doorbell
    ($NETSUM_SHM_SPIN_US, default 0).  Spinning pays only with a core to spare: on the 2
    shared cores this was measured on, a 20 µs spin cut a bare ring forwarder from 1.3-2.3 M
    to 0.4-0.85 M frames/s and tripled a ping-pong's round trip (docs/performance.md)."""
    raw = os.environ.get(_SPIN_ENV, "").strip()
    try:
        return max(0, int(raw)) * 1e-6 if raw else _DEFAULT_SPIN_US * 1e-6
    except ValueError:
        return _DEFAULT_SPIN_US * 1e-6


def frame_for(nbytes: int) -> int:
    """The `frame=` a port needs for frames of `nbytes`: DEFAULT_FRAME, or more (a multiple
    of 64) where a K beyond 256 makes the frame longer (K=1024: 4162 bytes, frame=4224)."""
    return max(DEFAULT_FRAME, -(-nbytes // 64) * 64)


def _align(n: int, to: int = 4096) -> int:
    return -(-n // to) * to


@dataclass(frozen=True, slots=True)
class Layout:
    """Where everything is in a region of `slots` descriptors per ring and `frame`-byte
    buffers."""
    slots: int = DEFAULT_SLOTS
    frame: int = DEFAULT_FRAME

    def __post_init__(self) -> None:
        if not 2 <= self.slots <= MAX_SLOTS or self.slots & (self.slots - 1):
            raise ValueError(f"ring slots must be a power of two in 2..{MAX_SLOTS}, "
                             f"got {self.slots}")
        if not 64 <= self.frame <= MAX_FRAME or self.frame % 64:
            raise ValueError(f"ring frame size must be a multiple of 64 in 64..{MAX_FRAME} "
                             f"bytes, got {self.frame}")

    def ctrl(self, ring: int) -> int:
        return CTRL + ring * CTRL_STRIDE

    def desc(self, ring: int) -> int:
        return HEADER + ring * _align(self.slots * DESC)

    def buffers(self, ring: int) -> int:
        return HEADER + 2 * _align(self.slots * DESC) + ring * self.slots * self.frame

    @property
    def size(self) -> int:
        return self.buffers(2)

    def header(self) -> bytes:
        return MAGIC + b"".join(v.to_bytes(4, "little") for v in (VERSION, self.slots,
                                                                    self.frame))


class _Ring:
    """One ring of a mapped region, seen from one side (its indices live in the region)."""

    __slots__ = ("slots", "frame", "bad_desc", "bad_index", "_w", "_b", "_h", "_t", "_k",
                 "_d", "_lo", "_hi", "_mask", "_bell")

    def __init__(self, mem: memoryview, layout: Layout, ring: int, bell: int) -> None:
        self.slots, self.frame = layout.slots, layout.frame
        self._b = mem
        self._w = mem.cast("I")                  # u32 words, native byte order
        c = layout.ctrl(ring) // 4
        self._h, self._t, self._k = c + HEAD // 4, c + TAIL // 4, c + WAKE // 4
        self._d = layout.desc(ring) // 4
        self._lo = layout.buffers(ring)
        self._hi = self._lo + layout.slots * layout.frame
        self._mask = layout.slots - 1
        self._bell = bell                         # eventfd: rung by the producer
        #: descriptors outside the ring's buffers / heads beyond the ring
        self.bad_desc = 0
        self.bad_index = 0

    def release(self) -> None:
        self._w.release()


class Producer(_Ring):
    """The writing side of one ring."""

    __slots__ = ()

    def put(self, frames: Sequence[bytes | memoryview | bytearray],
            order: Sequence[int] | None = None, start: int = 0) -> int:
        """Frames `frames[order[start]], frames[order[start + 1]], ...` (or frames[start:])
        into the ring until it is full: how many went (from `start` on).  A frame longer than
        the ring's buffers stops the batch before it (the caller decides: `fits`)."""
        w, b, mask, frame = self._w, self._b, self._mask, self.frame
        head = w[self._h]
        used = (head - w[self._t]) & _U32
        if used > self.slots:                    # the consumer's tail is impossible
            self.bad_index += 1
            w[self._t] = head
            used = 0
        room = self.slots - used
        seq = frames if order is None else order
        end = min(len(seq), start + room)
        d, lo = self._d, self._lo
        n = 0
        for j in range(start, end):
            f = frames[seq[j]] if order is not None else frames[j]  # type: ignore[index]
            ln = len(f)
            if ln > frame:
                break
            i = (head + n) & mask
            off = lo + i * frame
            b[off:off + ln] = f
            w[d + 2 * i] = off
            w[d + 2 * i + 1] = ln
            n += 1
        if n:
            _ORDER()                            # descriptors before head (release)
            w[self._h] = (head + n) & _U32
            self.notify()
        return n

    def fits(self, frame: bytes | memoryview | bytearray) -> bool:
        return len(frame) <= self.frame

    def notify(self) -> None:
        """After publishing: wake the consumer if it said it may sleep."""
        fence()
        if self._w[self._k]:
            try:
                os.eventfd_write(self._bell, 1)
            except BlockingIOError:
                pass                              # the counter is full: it is rung already

    def free(self) -> int:
        used = (self._w[self._h] - self._w[self._t]) & _U32
        return self.slots - used if used <= self.slots else 0


class Consumer(_Ring):
    """The reading side of one ring."""

    __slots__ = ()

    def pending(self) -> int:
        return (self._w[self._h] - self._w[self._t]) & _U32

    def skip(self) -> None:
        """Drop whatever the ring holds (a new peer: what the old one left is not its)."""
        self._w[self._t] = self._w[self._h]

    def take(self, limit: int, sink: Callable[[memoryview], object]) -> int:
        """Hand up to `limit` frames to `sink` (a view into the region, valid only during
        the call: copy it), in ring order; bad descriptors are counted and skipped.  Returns
        the descriptors consumed."""
        w = self._w
        tail = w[self._t]
        head = w[self._h]
        n = (head - tail) & _U32
        if n > self.slots:
            self.bad_index += 1
            w[self._t] = head
            return 0
        if n > limit:
            n = limit
        if not n:
            return 0
        _ORDER()                                  # head before the descriptors (acquire)
        b, d, mask, lo, hi = self._b, self._d, self._mask, self._lo, self._hi
        for j in range(n):
            i = (tail + j) & mask
            off = w[d + 2 * i]
            ln = w[d + 2 * i + 1]
            if off < lo or off + ln > hi:
                self.bad_desc += 1
                continue
            sink(b[off:off + ln])
        _ORDER()                                  # the copies before tail (release)
        w[self._t] = (tail + n) & _U32
        return n

    def wait(self, timeout: float, spin: float = 0.0) -> bool:
        """Until the ring holds a frame (True) or `timeout` seconds pass (False): polls for
        up to `spin` seconds, then sleeps on the doorbell."""
        w, h, t = self._w, self._h, self._t
        if w[h] != w[t]:
            return True
        if spin > 0:
            end = time.monotonic() + min(spin, timeout)
            while time.monotonic() < end:
                if w[h] != w[t]:
                    return True
        if timeout <= 0:
            return False
        w[self._k] = 1
        fence()
        try:
            if w[h] != w[t]:
                return True
            select.select([self._bell], [], [], timeout)
            self.drain_bell()
            return w[h] != w[t]
        finally:
            w[self._k] = 0

    def arm(self) -> bool:
        """Say this side may sleep (wake = 1); True if a frame came meanwhile (do not)."""
        self._w[self._k] = 1
        fence()
        return self._w[self._h] != self._w[self._t]

    def disarm(self) -> None:
        self._w[self._k] = 0

    def drain_bell(self) -> None:
        try:
            os.eventfd_read(self._bell)
        except BlockingIOError:
            pass


def _eventfd() -> int:
    return os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)


class ShmServer:
    """The switch's side of one port: the region, both doorbells, the listening socket and
    the one peer's connection."""

    def __init__(self, path: str, layout: Layout, number: int) -> None:
        if _FENCE is None:
            fence()                  # the clear error at start, not a dead port in the loop
        self.path, self.layout, self.number = path, layout, number
        self.peer_pid: int | None = None
        self.conn: socket.socket | None = None
        self._fds: list[int] = []
        self._mem: mmap.mmap | None = None
        self.listener: socket.socket | None = None
        try:
            self._memfd = os.memfd_create(f"netsum-port{number}",
                                          os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            self._fds.append(self._memfd)
            os.ftruncate(self._memfd, layout.size)
            import fcntl
            fcntl.fcntl(self._memfd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self._mem = mmap.mmap(self._memfd, layout.size)
            self._mem[:len(layout.header())] = layout.header()
            #: the switch's doorbell (the C loop polls it) and the peer's
            self.bell_in, self.bell_out = _eventfd(), _eventfd()
            self._fds += [self.bell_in, self.bell_out]
            self.listener = _listen(path, number)
        except OSError as exc:
            self.close()
            if isinstance(exc, ShmError):
                raise
            raise ShmError(exc.errno, f"port {number}: shared-memory ring for {path}: "
                                      f"{exc.strerror or exc}") from None
        view = memoryview(self._mem)
        self.view = view
        self.rx = Consumer(view, layout, TO_SWITCH, self.bell_in)
        self.tx = Producer(view, layout, TO_PEER, self.bell_out)

    @property
    def mem(self) -> mmap.mmap:
        assert self._mem is not None
        return self._mem

    def service(self) -> str | None:
        """Handle the control socket (never blocks): a gone peer, a new one or one refused.
        Returns a line worth logging, or None."""
        said = self._check_gone()
        assert self.listener is not None
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return said
            except OSError:
                return said
            pid = _peer_pid(conn)
            # (looked at again: the peer may have left after the last connection came)
            said = self._check_gone() or said
            if self.conn is not None:
                _refuse(conn, f"NSUMRING busy pid={self.peer_pid}\n")
                said = (f"port {self.number}: refused pid {pid} (pid {self.peer_pid} is "
                        "attached)")
                continue
            lay = self.layout
            hello = (f"NSUMRING {VERSION} slots={lay.slots} frame={lay.frame} "
                     f"size={lay.size} port={self.number}\n").encode()
            try:
                conn.setblocking(True)
                conn.settimeout(1.0)
                socket.send_fds(conn, [hello], [self._memfd, self.bell_in, self.bell_out])
                conn.setblocking(False)
            except OSError:
                conn.close()
                continue
            self.conn, self.peer_pid = conn, pid
            said = f"port {self.number}: peer pid {pid} attached"

    def _check_gone(self) -> str | None:
        if self.conn is None or not _gone(self.conn):
            return None
        said = f"port {self.number}: peer pid {self.peer_pid} detached"
        self.conn.close()
        self.conn, self.peer_pid = None, None
        return said

    def control_fds(self) -> list[int]:
        return [] if self.listener is None else [self.listener.fileno()]

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.listener is not None:
            try:
                st = os.stat(self.path)
                if st.st_ino == os.fstat(self.listener.fileno()).st_ino or \
                        stat.S_ISSOCK(st.st_mode):
                    os.unlink(self.path)
            except OSError:
                pass
            self.listener.close()
            self.listener = None
        for r in (getattr(self, "rx", None), getattr(self, "tx", None)):
            if r is not None:
                r.release()
        v = getattr(self, "view", None)
        if v is not None:
            v.release()
        if self._mem is not None:
            try:
                self._mem.close()
            except BufferError:
                pass                              # still exported (the C loop): GC frees it
            self._mem = None
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []


def _listen(path: str, number: int) -> socket.socket:
    """A Unix stream socket listening at `path`; a stale socket file (a switch that died) is
    replaced, a live one or any other kind of file is an error."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not stat.S_ISSOCK(st.st_mode):
            raise ShmError(f"port {number}: {path} exists and is not a socket (not removed)")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            os.unlink(path)                        # nobody listens: left by a dead switch
        except OSError as exc:
            raise ShmError(f"port {number}: {path}: {exc.strerror}") from None
        else:
            raise ShmError(f"port {number}: {path} is served by another process")
        finally:
            probe.close()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(path)
        os.chmod(path, 0o600)
        s.listen(8)
    except OSError as exc:
        s.close()
        raise ShmError(f"port {number}: cannot listen on {path}: {exc.strerror}") from None
    s.setblocking(False)
    return s


def _gone(conn: socket.socket) -> bool:
    """Has the peer closed its end?  (Anything it sent is read and ignored.)"""
    try:
        while True:
            data = conn.recv(4096)
            if not data:
                return True
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


def _peer_pid(conn: socket.socket) -> int:
    try:
        cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        return int.from_bytes(cred[:4], "little")
    except OSError:
        return 0


def _refuse(conn: socket.socket, line: str) -> None:
    try:
        conn.setblocking(False)
        conn.send(line.encode())
    except OSError:
        pass
    conn.close()


class ShmPeer:
    """The peer's side of one port (a worker): its producer towards the switch, its
    consumer of the switch's frames, and the connection that holds the port."""

    def __init__(self, path: str, sock: socket.socket, layout: Layout, mem: mmap.mmap,
                 bell_in: int, bell_out: int, number: int) -> None:
        self.path, self.layout, self.number = path, layout, number
        self._sock, self._mem = sock, mem
        self._fds = [bell_in, bell_out]
        self.view = memoryview(mem)
        self.tx = Producer(self.view, layout, TO_SWITCH, bell_in)
        self.rx = Consumer(self.view, layout, TO_PEER, bell_out)
        self.rx.skip()
        self.rx.drain_bell()

    def fileno(self) -> int:
        """The doorbell this peer waits on."""
        return self._fds[1]

    def close(self) -> None:
        if self._sock.fileno() < 0:
            return
        self._sock.close()
        self.tx.release()
        self.rx.release()
        try:
            self.view.release()
            self._mem.close()
        except BufferError:
            pass               # views of the caller's still point in: unmapped with the last
        for fd in self._fds:
            os.close(fd)


def attach(path: str, timeout: float = 5.0) -> ShmPeer:
    """Connect to the switch port listening at `path` and map its rings."""
    if _FENCE is None:
        fence()                                   # raises the clear error
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fds: list[int] = []
    try:
        s.settimeout(timeout)
        try:
            s.connect(path)
            msg, fds, _flags, _addr = socket.recv_fds(s, 512, 4)
        except OSError as exc:
            why = exc.strerror or str(exc) or type(exc).__name__
            raise ShmError(f"shared-memory port {path}: {why}") from None
        line = msg.decode("ascii", "replace").strip()
        words = line.split()
        if len(words) >= 2 and words[:2] == ["NSUMRING", "busy"]:
            raise ShmError(f"shared-memory port {path} is taken by another peer "
                           f"({' '.join(words[2:])})")
        fields = dict(w.split("=", 1) for w in words[2:] if "=" in w)
        if words[:2] != ["NSUMRING", str(VERSION)] or len(fds) != 3 or \
                not {"slots", "frame", "size", "port"} <= fields.keys():
            raise ShmError(f"shared-memory port {path}: not a netsum ring (said {line!r})")
        try:
            layout = Layout(int(fields["slots"]), int(fields["frame"]))
        except ValueError as exc:
            raise ShmError(f"shared-memory port {path}: {exc}") from None
        memfd, bell_in, bell_out = fds
        if int(fields["size"]) != layout.size or os.fstat(memfd).st_size != layout.size:
            raise ShmError(f"shared-memory port {path}: region of "
                           f"{os.fstat(memfd).st_size} bytes, expected {layout.size}")
        mem = mmap.mmap(memfd, layout.size)
        os.close(memfd)
        fds = []
        if mem[:len(layout.header())] != layout.header():
            mem.close()
            os.close(bell_in)
            os.close(bell_out)
            raise ShmError(f"shared-memory port {path}: region header does not match")
        s.setblocking(False)
        return ShmPeer(path, s, layout, mem, bell_in, bell_out, int(fields["port"]))
    except BaseException:
        for fd in fds:
            os.close(fd)
        s.close()
        raise
