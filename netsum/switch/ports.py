"""Switch ports and the packet loop: Linux interfaces (AF_PACKET), UDP-tunnel ports and
shared-memory ports.

`-i N@IFACE` opens one AF_PACKET socket bound to IFACE (promiscuous).
`-i N@udp:HOST:PORT=PEERHOST:PEERPORT` binds a UDP socket whose one peer is fixed on the
command line: each datagram is one whole Ethernet frame; output goes to the peer, and a
datagram from any other address is dropped and counted (`stats.udp_foreign`), so no other
local process can feed a port or take over its output.  (`,` is accepted for `=`.)
`-i N@shm:PATH[,slots=S][,frame=BYTES]` listens on a Unix socket at PATH for the port's one
peer and hands it a pair of shared-memory frame rings (netsum/shmring.py: the format, the
trust rules, the counters `shm_bad_desc`, `shm_bad_index`, `shm_tx_full`).
One thread runs the port loop.  The C loop (netsum/switch/native/io.py: recvmmsg/sendmmsg around
the native pipeline) serves the ports whenever it can do exactly what the Python loop does;
otherwise one selector over all sockets calls `Device.receive` per frame and the device calls
back `PortSet.transmit` for outputs.  `io_status` says which loop runs and why.
With the C loop, UDP-tunnel sockets get UDP_GRO (netsum/udpgso.py, NETSUM_UDP_GSO=0: not):
datagrams a peer sent as one GSO send arrive as one buffer, which either loop splits into
the datagrams, each delivered as its own frame, in order, as if received one by one.
"""
from __future__ import annotations

import enum
import errno
import gc
import logging
import os
import selectors
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netsum import udpgso
from netsum.shmring import Layout, ShmServer
from netsum.switch.device import MAX_FRAME, Device
from netsum.switch.native import io as nio
from netsum.switch.pcap import PcapWriter

__all__ = ["PortKind", "PortSpec", "parse_port_spec", "PortSet"]

_ETH_P_ALL = 0x0003
_SOL_PACKET = 263
_PACKET_ADD_MEMBERSHIP = 1
_PACKET_MR_PROMISC = 1
_PACKET_OUTGOING = 4
_PACKET_AUXDATA = 8
_TP_STATUS_VLAN_VALID = 0x10
_TP_STATUS_VLAN_TPID_VALID = 0x40
_AUXDATA = struct.Struct("=IIIHHHH")    # struct tpacket_auxdata
_BATCH = 64                 # frames drained per readiness event before re-polling
_MAX_PORT = 511
_log = logging.getLogger("netsum.switch.ports")


class PortKind(enum.Enum):
    LINUX = "linux"
    UDP = "udp"
    SHM = "shm"


@dataclass(frozen=True, slots=True)
class PortSpec:
    number: int
    iface: str                        # interface name, or "udp:HOST:PORT=PEER:PORT" as given
    kind: PortKind
    bind: tuple[str, int] | None = None
    peer: tuple[str, int] | None = None   # UDP: the one address this port talks to
    path: str | None = None           # SHM: the Unix socket the peer connects to
    layout: Layout | None = None      # SHM: the rings' geometry

    @property
    def pcap_name(self) -> str:
        return self.iface.replace(":", "_").replace(",", "_").replace("=", "_") \
            .replace("/", "_")


def _hostport(text: str, what: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{what} '{text}' is not HOST:PORT")
    try:
        p = int(port)
    except ValueError:
        raise ValueError(f"{what} '{text}': port '{port}' is not a number") from None
    if not 0 <= p <= 65535:
        raise ValueError(f"{what} '{text}': port {p} outside 0..65535")
    return host.strip("[]"), p


def parse_port_spec(text: str) -> PortSpec:
    """`N@IFACE` or `N@udp:HOST:PORT=PEERHOST:PEERPORT`; ValueError with a clear message."""
    num, sep, rest = text.partition("@")
    if not sep or not rest:
        raise ValueError(f"bad interface spec '{text}' (expected PORT@IFACE)")
    try:
        n = int(num)
    except ValueError:
        raise ValueError(f"bad interface spec '{text}': port '{num}' is not a number") from None
    if not 0 <= n <= _MAX_PORT:
        raise ValueError(f"bad interface spec '{text}': port {n} outside 0..{_MAX_PORT}")
    if rest.startswith("shm:"):
        return _shm_spec(n, text, rest)
    if rest.startswith("udp:"):
        local, _, peer = rest[4:].partition("=" if "=" in rest else ",")
        if not peer:
            raise ValueError(f"bad interface spec '{text}': a UDP-tunnel port needs its peer, "
                             f"{n}@udp:HOST:PORT=PEERHOST:PEERPORT (datagrams from any other "
                             "address are dropped)")
        return PortSpec(n, rest, PortKind.UDP, _hostport(local, "UDP address"),
                        _hostport(peer, "UDP peer"))
    if len(rest) > 15 or "/" in rest or " " in rest:
        raise ValueError(f"bad interface spec '{text}': '{rest}' is not an interface name")
    return PortSpec(n, rest, PortKind.LINUX)


def _shm_spec(n: int, text: str, rest: str) -> PortSpec:
    path, *opts = rest[4:].split(",")
    if not path or "\0" in path:
        raise ValueError(f"bad interface spec '{text}': a shared-memory port needs a path, "
                         f"{n}@shm:PATH[,slots=S][,frame=BYTES]")
    geometry = {"slots": Layout().slots, "frame": Layout().frame}
    for opt in opts:
        key, sep, value = opt.partition("=")
        if key not in geometry or not sep or not value.isdigit():
            raise ValueError(f"bad interface spec '{text}': '{opt}' is not slots=N or "
                             "frame=BYTES")
        geometry[key] = int(value)
    try:
        layout = Layout(geometry["slots"], geometry["frame"])
    except ValueError as e:
        raise ValueError(f"bad interface spec '{text}': {e}") from None
    return PortSpec(n, rest, PortKind.SHM, path=path, layout=layout)


class _Control:
    """Selector data of a shared-memory port's listening socket."""
    __slots__ = ("port",)

    def __init__(self, port: _Port) -> None:
        self.port = port


class _Port:
    __slots__ = ("spec", "sock", "shm", "peer", "pcap_in", "pcap_out", "gro")

    def __init__(self, spec: PortSpec, sock: socket.socket | None,
                 shm: ShmServer | None = None) -> None:
        self.spec = spec
        self.sock = sock
        self.shm = shm
        # UDP: the peer as recvfrom() reports it (a name like `localhost` resolved), the one
        # source a datagram on this port is accepted from.
        self.peer = _resolve(spec, sock) if spec.kind is PortKind.UDP else None
        self.pcap_in: PcapWriter | None = None
        self.pcap_out: PcapWriter | None = None
        #: UDP_GRO is on: a received buffer may hold several datagrams (netsum/udpgso.py)
        self.gro = False


def _resolve(spec: PortSpec, sock: socket.socket | None) -> tuple[str, int]:
    assert spec.peer is not None and sock is not None
    host, port = spec.peer
    try:
        info = socket.getaddrinfo(host, port, sock.family, socket.SOCK_DGRAM)
    except OSError as e:
        raise OSError(getattr(e, "errno", None), f"port {spec.number}: UDP peer "
                      f"{host}:{port}: {getattr(e, 'strerror', None) or e}") from None
    addr = info[0][4]
    return str(addr[0]), int(addr[1])


class PortSet:
    def __init__(self, specs: list[PortSpec], device: Device, pcap_dir: Path | None = None,
                 log: logging.Logger | None = None) -> None:
        seen: set[int] = set()
        for s in specs:
            if s.number in seen:
                raise ValueError(f"port {s.number} given twice")
            seen.add(s.number)
        self.specs = specs
        self.device = device
        self.pcap_dir = pcap_dir
        self.log = log if log is not None and log.isEnabledFor(logging.DEBUG) else None
        self.ports: dict[int, _Port] = {}
        self._senders: dict[int, Callable[[bytes], None]] = {}
        self.sel = selectors.DefaultSelector()
        #: The C port loop (netsum/switch/native/io.py), None when this port set cannot use it.
        self.fast: Any = None
        self._io_why = "python: ports not opened"

    def open(self) -> None:
        try:
            for spec in self.specs:
                if spec.kind is PortKind.SHM:
                    assert spec.path is not None and spec.layout is not None
                    port = _Port(spec, None, ShmServer(spec.path, spec.layout, spec.number))
                else:
                    port = _Port(spec, self._open_socket(spec))
                self.ports[spec.number] = port
                if self.pcap_dir is not None:
                    port.pcap_in = PcapWriter(self.pcap_dir / f"{spec.pcap_name}_in.pcap")
                    port.pcap_out = PcapWriter(self.pcap_dir / f"{spec.pcap_name}_out.pcap")
                self._senders[spec.number] = self._sender(port)
                if port.shm is not None:
                    self.sel.register(port.shm.bell_in, selectors.EVENT_READ, port)
                    assert port.shm.listener is not None
                    self.sel.register(port.shm.listener, selectors.EVENT_READ, _Control(port))
                else:
                    assert port.sock is not None
                    self.sel.register(port.sock, selectors.EVENT_READ, port)
        except BaseException:
            self.close()
            raise
        self.device.transmit = self.transmit
        self._attach_fast()

    def _attach_fast(self) -> None:
        """Use the C port loop when it does exactly what this loop would."""
        ok, why = nio.wanted()
        if ok and self.pcap_dir is not None:
            ok, why = False, "pcap files (--pcap) are written by the Python loop"
        if ok and self.log is not None:
            ok, why = False, "per-packet debug logging is on"
        if ok:
            kinds = {PortKind.UDP: nio.KIND_UDP, PortKind.LINUX: nio.KIND_LINUX,
                     PortKind.SHM: nio.KIND_SHM}
            try:
                self.fast = nio.NativeIO(self.device, [
                    (p.spec.number, p.shm if p.shm is not None else p.sock, kinds[p.spec.kind],
                     p.peer) for p in self.ports.values()],
                    [fd for p in self.ports.values() if p.shm is not None
                     for fd in p.shm.control_fds()])
            except ValueError as e:
                ok, why = False, str(e)
        if ok:
            for p in self.ports.values():
                if p.spec.kind is PortKind.UDP and p.sock is not None:
                    p.gro = udpgso.enable_gro(p.sock)
        if not ok:
            self._io_why = f"python: {why}"
            self.device.io_status = self._io_why
            nio.log.info("port loop: %s", self._io_why)
            return
        self.fast.load(wait=os.environ.get(nio.ENV, "").strip() == "1")

    @property
    def io_status(self) -> str:
        """`c: ...` while the C port loop serves the ports, else `python: <why>`."""
        return self.fast.status if self.fast is not None else self._io_why

    def describe(self) -> str:
        """`N@IFACE ...` for the opened ports, as the ready line shows them: a UDP port asked
        for as `:0` shows the port the OS bound, so callers need not pick free ports first
        (picking them leaves a window in which another process may take one)."""
        out = []
        for spec in self.specs:
            port = self.ports.get(spec.number)
            iface = spec.iface
            if spec.kind is PortKind.UDP and port is not None and port.sock is not None:
                local, sep, peer = iface[4:].partition("=" if "=" in iface else ",")
                host = local.rpartition(":")[0]
                iface = f"udp:{host}:{port.sock.getsockname()[1]}{sep}{peer}"
            out.append(f"{spec.number}@{iface}")
        return " ".join(out)

    @staticmethod
    def _open_socket(spec: PortSpec) -> socket.socket:
        if spec.kind is PortKind.UDP:
            assert spec.bind is not None
            fam = socket.AF_INET6 if ":" in spec.bind[0] else socket.AF_INET
            sock = socket.socket(fam, socket.SOCK_DGRAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
                sock.bind(spec.bind)
            except OSError as e:
                sock.close()
                raise OSError(e.errno, f"port {spec.number}: cannot bind UDP "
                                       f"{spec.bind[0]}:{spec.bind[1]}: {e.strerror}") from None
            sock.setblocking(False)
            return sock
        try:
            # Protocol 0 until bound: a socket opened for ETH_P_ALL hears every interface of
            # the host until bind() narrows it, and those frames would reach the program.
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except (OSError, AttributeError) as e:
            raise OSError(getattr(e, "errno", None), f"port {spec.number}: cannot open a raw "
                          f"socket for '{spec.iface}' ({e}); needs root/CAP_NET_RAW") from None
        try:
            sock.bind((spec.iface, _ETH_P_ALL))           # CPython applies htons here
            ifindex = socket.if_nametoindex(spec.iface)
            sock.setsockopt(_SOL_PACKET, _PACKET_ADD_MEMBERSHIP,
                            struct.pack("iHH8s", ifindex, _PACKET_MR_PROMISC, 0, b""))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            # The kernel strips a received VLAN tag into metadata before packet taps see the
            # frame; ask for that metadata so the tag can be put back (as libpcap does).
            sock.setsockopt(_SOL_PACKET, _PACKET_AUXDATA, 1)
        except OSError as e:
            sock.close()
            raise OSError(e.errno, f"port {spec.number}: cannot attach to interface "
                                   f"'{spec.iface}': {e.strerror}") from None
        sock.setblocking(False)
        return sock

    # -- data path -------------------------------------------------------------------------
    def _sender(self, p: _Port) -> Callable[[bytes], None]:
        """The per-port send function, built once: the packet path then pays one call."""
        sock = p.sock
        send: Callable[[bytes], None]
        if p.shm is not None:
            send = self._shm_sender(p.shm)
        elif p.spec.kind is PortKind.LINUX:
            assert sock is not None
            send = sock.send  # type: ignore[assignment]
        else:
            peer = p.peer
            assert peer is not None and sock is not None
            sendto = sock.sendto

            def send(frame: bytes) -> None:
                sendto(frame, peer)
        if p.pcap_out is None and self.log is None:
            return send
        pcap, log, num, raw = p.pcap_out, self.log, p.spec.number, send

        def send_logged(frame: bytes) -> None:
            if pcap is not None:
                pcap.write(frame)
            if log is not None:
                log.debug("Transmitting packet of size %d out of port %d", len(frame), num)
            raw(frame)
        return send_logged

    def _shm_sender(self, shm: ShmServer) -> Callable[[bytes], None]:
        tx, dev = shm.tx, self.device

        def send(frame: bytes) -> None:
            if not tx.fits(frame):     # as a datagram above the MTU: counted in tx_errors
                raise OSError(errno.EMSGSIZE, "frame longer than the ring's buffers")
            if not tx.put((frame,)):
                dev.stats.shm_tx_full += 1
            if tx.bad_index:
                dev.stats.shm_bad_index += tx.bad_index
                tx.bad_index = 0
        return send

    def transmit(self, port: int, frame: bytes) -> None:
        send = self._senders.get(port)
        if send is None:
            self.device.stats.no_tx_port += 1
            return
        try:
            send(frame)
        except OSError:
            self.device.stats.tx_errors += 1

    def _drain(self, p: _Port) -> None:
        if p.shm is not None:
            self._drain_shm(p, p.shm)
            return
        if p.spec.kind is PortKind.LINUX:
            self._drain_linux(p)
            return
        sock = p.sock
        assert sock is not None
        receive = self.device.receive
        num = p.spec.number
        peer_host, peer_port = p.peer or ("", -1)
        stats = self.device.stats
        plain = p.pcap_in is None and self.log is None
        if p.gro:
            self._drain_gro(p)
            return
        for _ in range(_BATCH):
            try:
                data, addr = sock.recvfrom(MAX_FRAME + 1)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return                # e.g. ICMP-induced errors on UDP; the socket stays usable
            if addr[1] != peer_port or addr[0] != peer_host:
                # Not this port's host: it never reaches the program (nor the pcap).
                stats.udp_foreign += 1
                if self.log is not None:
                    self.log.debug("Dropping a datagram from %s:%d on port %d (its peer is "
                                   "%s:%d)", addr[0], addr[1], num, peer_host, peer_port)
                continue
            if plain:
                receive(num, data)
            else:
                self._deliver(p, num, data, receive)

    def _drain_gro(self, p: _Port) -> None:
        """_drain for a socket with UDP_GRO on: a buffer that arrived coalesced is split into
        its datagrams (netsum/udpgso.py's rule, ioloop.c's), each delivered as one frame; one
        source address for all of them."""
        sock = p.sock
        assert sock is not None
        receive, num = self.device.receive, p.spec.number
        peer_host, peer_port = p.peer or ("", -1)
        for _ in range(_BATCH):
            try:
                data, anc, _flags, addr = sock.recvmsg(MAX_FRAME + 1, 64)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            parts = udpgso.split(len(data), udpgso.segment_size(anc))
            if addr[1] != peer_port or addr[0] != peer_host:
                self.device.stats.udp_foreign += len(parts)
                continue
            for off, length in parts:
                self._deliver(p, num, data[off:off + length], receive)

    def _drain_shm(self, p: _Port, shm: ShmServer) -> None:
        """Up to _BATCH frames of the port's ring, each copied out before the program sees it
        (the peer can rewrite the region at any time)."""
        receive, num = self.device.receive, p.spec.number
        if p.pcap_in is None and self.log is None:
            def sink(view: memoryview) -> None:
                receive(num, bytes(view))
        else:
            def sink(view: memoryview) -> None:
                self._deliver(p, num, bytes(view), receive)
        rx = shm.rx
        rx.take(_BATCH, sink)
        if rx.bad_desc or rx.bad_index:
            stats = self.device.stats
            stats.shm_bad_desc += rx.bad_desc
            stats.shm_bad_index += rx.bad_index
            rx.bad_desc = rx.bad_index = 0

    def _service_shm(self, shm: ShmServer) -> None:
        said = shm.service()
        if said:
            _log.info("%s", said)

    def _drain_linux(self, p: _Port) -> None:
        sock = p.sock
        assert sock is not None
        receive = self.device.receive
        num = p.spec.number
        for _ in range(_BATCH):
            try:
                data, anc, _flags, addr = sock.recvmsg(MAX_FRAME + 1, 64)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if addr[2] == _PACKET_OUTGOING:
                continue              # our own transmissions seen by the tap
            for level, kind, cdata in anc:
                if level == _SOL_PACKET and kind == _PACKET_AUXDATA and \
                        len(cdata) >= _AUXDATA.size:
                    status, _l, _s, _m, _n, tci, tpid = _AUXDATA.unpack_from(cdata)
                    if status & _TP_STATUS_VLAN_VALID and len(data) >= 12:
                        if not status & _TP_STATUS_VLAN_TPID_VALID:
                            tpid = 0x8100
                        data = data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
            self._deliver(p, num, data, receive)

    def _deliver(self, p: _Port, num: int, data: bytes,
                 receive: Callable[[int, bytes], None]) -> None:
        if p.pcap_in is not None:
            p.pcap_in.write(data)
        if self.log is not None:
            self.log.debug("Processing packet received on port %d (%d bytes)", num, len(data))
        receive(num, data)

    def run(self, should_stop: Callable[[], bool], poll: float = 0.2) -> None:
        sel = self.sel
        last_flush = time.monotonic()
        # Startup objects (the loaded program, imported modules) never become garbage: move
        # them out of the collector's view so its periodic passes stay cheap per packet.
        gc.collect()
        gc.freeze()
        dev = self.device
        fast = self.fast
        retry_at = 0.0
        rings = [p.shm for p in self.ports.values() if p.shm is not None]
        while not should_stop():
            if fast is not None and fast.ready:
                # The C loop never services egress queues: while a queued packet waits (a port
                # with a rate) the Python loop runs, also when no frame arrives to close the gate.
                if time.monotonic() >= retry_at and dev.next_deadline() is None:
                    code = fast.run()
                    if code == nio.CONTROL:
                        for shm in rings:
                            self._service_shm(shm)
                    if code != nio.GATE_CLOSED and dev.next_deadline() is None:
                        continue
                    retry_at = time.monotonic() + nio.RETRY      # the Python loop serves a while
                poll = min(poll, nio.RETRY)
            # Queued packets (a port with a rate) leave on time: wake for the next departure.
            due = dev.next_deadline()
            # A ring's producer rings the doorbell only for a consumer that said it may sleep.
            wait = 0.0 if any([shm.rx.arm() for shm in rings]) else \
                poll if due is None else min(poll, due)
            events = sel.select(wait)
            for shm in rings:
                shm.rx.disarm()
            for key, _ev in events:
                data = key.data
                if isinstance(data, _Control):
                    assert data.port.shm is not None
                    self._service_shm(data.port.shm)
                elif data.shm is not None:
                    data.shm.rx.drain_bell()
                else:
                    self._drain(data)
            for p in self.ports.values():
                if p.shm is not None:
                    self._drain_shm(p, p.shm)
            if due is not None or dev.next_deadline() is not None:
                dev.service_queues()
            now = time.monotonic()
            if self.pcap_dir is not None and now - last_flush > 1.0:
                last_flush = now
                for p in self.ports.values():
                    if p.pcap_in is not None and p.pcap_out is not None:
                        p.pcap_in.flush()
                        p.pcap_out.flush()

    def close(self) -> None:
        if self.fast is not None:
            self.fast.close()
            self.fast = None
        if self.device.transmit == self.transmit:
            self.device.transmit = None
        for p in self.ports.values():
            for obj in (p.sock, *((p.shm.bell_in, p.shm.listener) if p.shm else ())):
                try:
                    if obj is not None:
                        self.sel.unregister(obj)
                except (KeyError, ValueError):
                    pass
            if p.sock is not None:
                p.sock.close()
            if p.shm is not None:
                p.shm.close()
            for w in (p.pcap_in, p.pcap_out):
                if w is not None:
                    w.close()
        self.ports.clear()
        self._senders.clear()
        self.sel.close()
