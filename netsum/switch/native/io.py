"""The daemon's port loop in C (netsum/switch/native/ioloop.c), for the common case.

The Python loop (`netsum.switch.ports.PortSet.run`) pays, per frame, one recvfrom, the Python
around `Device.receive` and one sendto per output: most of the daemon's CPU once the
pipeline itself is native.  `NativeIO` runs the same loop in C: poll() over the port
sockets, one recvmmsg of up to 64 frames per ready socket, each frame through the native
pipeline without a Python object, one sendmmsg per egress port.  Shared-memory ports
(netsum/shmring.py, shmport.c) are served in the same pass: up to 64 frames taken from a
port's ring per wake-up, its outputs put in the peer's ring; before sleeping the loop spins
for $NETSUM_SHM_SPIN_US (default 0) on the rings, then arms their doorbells, which poll()
watches with the sockets.  UDP-tunnel ports use GSO/GRO (netsum/udpgso.py, ioloop.c): a
coalesced receive is split into its datagrams, and a port's outputs of one length leave as
one GSO send where the peer is a loopback address; `gso_stats` counts both (NETSUM_UDP_GSO=0: plain sendmmsg).  A peer connecting to a port's socket makes run() return
(CONTROL) so that the PortSet accepts or refuses it.  It is the same semantics or it does
not run:

- chosen when the port set is opened (`attach`): not with pcap files or per-packet debug
  logging (those stay in the Python loop), not for a UDP peer whose address is not numeric
  after resolution, not when `NETSUM_NATIVE_IO=0` or no C compiler is here;
- per wake-up, under the Device lock, `gate` lets it run the packets only while the
  installed pipeline is native (adopted, tables reloaded into C when dirty) with no trace or
  log_msg output and no egress queue with a rate; otherwise the C loop returns without
  having read a frame and the Python loop serves the ports (it retries the C loop every
  RETRY seconds);
- the counters it keeps (rx/tx packets, oversize, udp_foreign, no_tx_port, tx_errors,
  assert failures, loop limits) are folded into `Device.stats` whenever they are read, and an
  exception in a native callback goes to `Device._internal_error` as on the Python path.

`NETSUM_NATIVE_IO=1` builds the module at open and waits for it; unset, a module not in
the cache yet is built in a background thread while the Python loop runs.  Which loop runs
and why is `PortSet.io_status` (also `Device.io_status`, served by GetStats as `io_loop`),
logged at info on the `netsum.native` logger when it changes.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
from importlib import resources
from types import ModuleType
from typing import Any

from netsum import udpgso
from netsum.shmring import HEAD, TAIL, TO_PEER, TO_SWITCH, WAKE, ShmServer, spin_seconds
from netsum.switch.native.build import IO_CFLAGS, BuildError, available, build_module, is_built
from netsum.switch.stats import Stats

__all__ = ["NativeIO", "ENV", "source", "wanted", "IDLE", "GATE_CLOSED", "SIGNAL", "CONTROL",
           "RETRY"]

ENV = "NETSUM_NATIVE_IO"
IDLE, GATE_CLOSED, SIGNAL, CONTROL = 0, 1, 2, 3      # run() codes (ioloop.c)
RUNNING = "c: recvmmsg/sendmmsg around the native pipeline"
RETRY = 0.05          # seconds of Python loop after the gate closed, before trying C again
BUDGET_MS = 20        # longest run() call: the daemon's should_stop is checked this often
KIND_UDP, KIND_LINUX, KIND_SHM = 0, 1, 2
_COUNTERS = ("rx_packets", "tx_packets", "oversize", "udp_foreign", "no_tx_port", "tx_errors",
             "assert_failures", "loop_limit", "shm_bad_desc", "shm_bad_index", "shm_tx_full")
log = logging.getLogger("netsum.native")


def source() -> str:
    """The C module's source, but its name (build.py adds MODNAME/MODINIT)."""
    rt = resources.files("netsum.switch.native")
    return ("#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n" +
            rt.joinpath("nsio.h").read_text() + rt.joinpath("shmport.c").read_text() +
            rt.joinpath("udpgso.h").read_text() + rt.joinpath("ioloop.c").read_text())


def wanted() -> tuple[bool, str]:
    """(try it, why not) from the environment and the machine."""
    env = os.environ.get(ENV, "").strip()
    if env == "0":
        return False, f"{ENV}=0"
    why = available()
    return (why is None), (why or "")


def _peer_bytes(sock: socket.socket, peer: tuple[str, int]) -> tuple[int, bytes] | None:
    host = peer[0]
    if "%" in host:                 # a scoped IPv6 peer: compared as text by the Python loop
        return None
    try:
        return sock.family, socket.inet_pton(sock.family, host)
    except OSError:
        return None


def _shm_spec(server: ShmServer) -> tuple[Any, ...]:
    """shmport.c's shm_init tuple: every offset from the ring format's one definition."""
    lay = server.layout
    return (server.mem, lay.slots, lay.frame, lay.ctrl(TO_SWITCH), lay.desc(TO_SWITCH),
            lay.buffers(TO_SWITCH), lay.ctrl(TO_PEER), lay.desc(TO_PEER), lay.buffers(TO_PEER),
            HEAD, TAIL, WAKE, server.bell_out)


class NativeIO:
    """The C loop over one PortSet's sockets and rings (the PortSet owns and closes them).
    `ports`: (number, socket, KIND_UDP | KIND_LINUX, UDP peer) or (number, ShmServer,
    KIND_SHM, None); `control`: fds whose readiness returns CONTROL from run()."""

    def __init__(self, device: Any, ports: list[tuple[int, Any, int, tuple[str, int] | None]],
                 control: list[int] | None = None) -> None:
        self.device = device
        self.mod: ModuleType | None = None
        self.loop: Any = None
        self.status = "python: C port loop not loaded yet"
        self._ports: list[tuple[Any, ...]] = []
        self._control = list(control or [])
        #: UDP ports whose outputs may leave as GSO sends: loopback peers (udpgso.sends_to)
        self._gso: list[int] = []
        self.spin_us = int(spin_seconds() * 1e6)
        for number, sock, kind, peer in ports:
            if kind == KIND_SHM:
                self._ports.append((number, sock.bell_in, kind, 0, b"", 0, _shm_spec(sock)))
            elif kind == KIND_UDP:
                assert peer is not None
                got = _peer_bytes(sock, peer)
                if got is None:
                    raise ValueError(f"port {number}: UDP peer {peer[0]} is not a numeric "
                                     "address")
                self._ports.append((number, sock.fileno(), kind, got[0], got[1], peer[1]))
                if udpgso.sends_to(peer[0]):
                    self._gso.append(number)
            else:
                self._ports.append((number, sock.fileno(), kind, 0, b"", 0))
        self._lock = device.lock
        self._why_closed = ""
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- loading ---------------------------------------------------------------------------
    def load(self, wait: bool) -> None:
        """Build (or take from the cache) the module: now when cached or `wait`, else in a
        background thread while the Python loop serves the ports."""
        src = source()
        if wait or is_built(src, IO_CFLAGS, "nsio"):
            self._load(src)
            return
        self._set("python: building the C port loop")
        self._thread = threading.Thread(target=self._load, args=(src,), daemon=True,
                                        name="netsum-ioloop-build")
        self._thread.start()

    def _load(self, src: str) -> None:
        try:
            mod = build_module(src, IO_CFLAGS, "nsio")
            loop = mod.new(self._ports, -1 if self.device.cpu_port is None
                           else self.device.cpu_port, self._control, self._gso)
        except (BuildError, OSError, ValueError, TypeError) as e:
            self._set(f"python: C port loop build failed: {e}", logging.WARNING)
            return
        with self.device.lock:
            if self._closed:
                return
            self.mod = mod
            self.device.stat_sources.append(self.take_stats)
            self.device.udp_gso = self.gso_stats
        self.loop = loop            # published last: run() uses it from here on
        self._set(RUNNING)

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def ready(self) -> bool:
        return self.loop is not None

    def _set(self, status: str, level: int = logging.INFO) -> None:
        if status != self.status:
            self.status = status
            self.device.io_status = status
            log.log(level, "port loop: %s", status)

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> int:
        """Serve the ports until idle for a moment, ~BUDGET_MS passed, a signal came, a
        control fd is readable (CONTROL) or the gate closed (GATE_CLOSED: nothing was read;
        the Python loop takes the ports)."""
        assert self.mod is not None
        code: int = self.mod.run(self.loop, self._lock.acquire, self._lock.release,
                                 self.gate, self.device._internal_error, 200, BUDGET_MS,
                                 self.spin_us)
        if code == GATE_CLOSED:
            self._set(f"python: {self._why_closed}")
        elif not self.status.startswith("c: "):
            self._set(RUNNING)
        return code

    def gate(self) -> tuple[Any, Any, Any] | None:
        """Called by the C loop with the Device lock held, once per wake-up: what to run the
        frames with, or None (with the reason kept) when only the Python path may."""
        dev = self.device
        v1 = dev._v1
        if v1 is None:
            self._why_closed = "no pipeline installed"
            return None
        if v1.trace is not None or v1.names["LOG_ON"]:
            self._why_closed = "trace or log_msg output is on"
            return None
        if v1.queues is not None:
            self._why_closed = "an egress queue has a rate"
            return None
        nat = v1.native
        if nat is None:
            if v1.pl.native is None:
                self._why_closed = f"the pipeline is not native ({v1.pl.native_status})"
                return None
            nat = v1._adopt()
        if nat.dirty:
            nat.flush()
        now = v1.now_us if v1.i_its is not None or v1.i_ets is not None else None
        return nat.pipe, now, dev.packet_in_handler

    def take_stats(self, stats: Stats) -> None:
        """Fold the C loop's counters into `stats` (called by Device.stats, lock held)."""
        if self.loop is None or self.mod is None:
            return
        for name, v in zip(_COUNTERS, self.mod.take_stats(self.loop)):
            if v:
                setattr(stats, name, getattr(stats, name) + v)

    def gso_stats(self) -> dict[str, int]:
        """The C loop's GSO/GRO counters so far (not in Device.stats: the Python loop sends
        one by one; served by GetStats as `udp_gso`): coalesced buffers received and their
        datagrams, GSO sends and their datagrams, sends the kernel refused as GSO;
        `ports_on`: UDP ports sending GSO now."""
        if self.loop is None or self.mod is None:
            return {}
        names = ("rx_buffers", "rx_segments", "tx_sends", "tx_segments", "refused", "ports_on")
        return dict(zip(names, self.mod.gso_stats(self.loop)))

    def close(self) -> None:
        with self.device.lock:
            self._closed = True
            if self.take_stats in self.device.stat_sources:
                self.take_stats(self.device._stats)
                self.device.stat_sources.remove(self.take_stats)
            self.loop = None
