"""A netsum-switch daemon as a child process, seen from outside: the ports a run names before
anything binds them, and the daemon's ready line (what it bound).  Shared by the rig, the
tests and the benchmarks.
"""
from __future__ import annotations

import random
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from netsum.procs import Child
from netsum.wire import UDP_PORT

__all__ = ["RigError", "SwitchReady", "parse_ready_line", "wait_switch_ready", "free_udp_ports",
           "free_tcp_ports"]


class RigError(Exception):
    """A run could not be set up or carried out.  str() is the one line the user sees."""


def _free_ports(n: int, kind: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, kind) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def free_tcp_ports(n: int) -> list[int]:
    """n distinct loopback TCP ports free right now, for host all-reduce peers that must be
    named before they listen (a clash fails loudly: the worker cannot listen)."""
    return _free_ports(n, socket.SOCK_STREAM)


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999                      # Linux's default


#: Where named UDP ports are picked: below the kernel's ephemeral range (see free_udp_ports),
#: above the well-known and registered ports services tend to hold.
_NAMED_LOW = 20000


def free_udp_ports(n: int) -> list[int]:
    """n distinct loopback UDP ports free right now (all held open together, so none repeats),
    outside the kernel's ephemeral range.

    For addresses that must be named before anything binds them: a UDP-tunnel port's fixed
    peer (a worker's address, the other end of a switch-to-switch link) goes on the switch's
    command line before that peer exists.  A port the kernel handed out for `:0` and took back
    is soon handed out again -- to the switch's own `:0` ports, to any other process -- and the
    worker then cannot bind its address; ports below the ephemeral range are never handed out
    for `:0`, so only another picker choosing the same random port can clash (and that fails
    loudly: the switch or the worker cannot bind).  The switch's own side is asked for as `:0`
    and read back from its ready line."""
    low = _ephemeral_range()[0]
    if low - _NAMED_LOW < 4 * n + 64:
        return _free_ports(n, socket.SOCK_DGRAM)     # no room below the range: take the OS's
    held: list[socket.socket] = []
    try:
        for port in random.sample(range(_NAMED_LOW, low), low - _NAMED_LOW):
            if len(held) == n:
                break
            if port == UDP_PORT:                    # the service port workers bind in netns
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            held.append(s)
        if len(held) < n:
            raise RigError(f"no {n} free UDP ports in {_NAMED_LOW}..{low - 1}")
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


# `netsum-switch: ready: device N; <N@IFACE ...|no ports>; <P4Runtime on ADDR|P4Runtime off>`
_READY = re.compile(r"ready: device \S+; (.*); P4Runtime (?:on (\S+)|off)")
_UDP_PORT = re.compile(r"^(\d+)@udp:.*:(\d+)$")


@dataclass(frozen=True, slots=True)
class SwitchReady:
    """What a netsum-switch daemon says it opened: P4Runtime address, UDP port per port."""
    grpc_addr: str | None                 # None with --no-grpc
    udp_ports: dict[int, int]             # switch port number -> bound local UDP port


def parse_ready_line(text: str) -> SwitchReady | None:
    """The first ready line in `text` (a daemon's stdout or log), or None if there is none yet.
    The daemon prints bound ports, so a port asked for as `:0` shows its real number."""
    m = _READY.search(text)
    if m is None:
        return None
    udp: dict[int, int] = {}
    for iface in m.group(1).split():
        # `N@udp:HOST:PORT=PEER` (or `,PEER`): the local side comes first.
        u = _UDP_PORT.match(re.split("[=,]", iface, maxsplit=1)[0])
        if u:
            udp[int(u.group(1))] = int(u.group(2))
    addr = m.group(2)
    return SwitchReady(addr.rstrip(";") if addr else None, udp)


def wait_switch_ready(child: Child, timeout: float = 30.0) -> SwitchReady:
    """Poll a netsum-switch child's log for its ready line; RigError if it exits first or does
    not get ready within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = child.log_path.read_text(errors="replace") if child.log_path else ""
        ready = parse_ready_line(text)
        if ready is not None:
            return ready
        if not child.alive():
            raise RigError(f"the switch exited at start: {text.strip()[-500:]}")
        time.sleep(0.05)
    raise RigError(f"the switch did not become ready within {timeout:g} s")
