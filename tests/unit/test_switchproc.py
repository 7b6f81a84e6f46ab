"""Named UDP ports (a tunnel port's fixed peer, picked before anything binds it) come from
below the kernel's ephemeral range: a port the kernel handed out for `:0` and took back is
soon handed out again (to the switch's own `:0` ports, to anyone), and the worker that was to
bind it then cannot.  Found as `cannot bind UDP ...: Address already in use` on a busy machine."""
from __future__ import annotations

import socket
from pathlib import Path

from netsum.switchproc import free_udp_ports
from netsum.wire import UDP_PORT


def test_named_udp_ports_are_free_distinct_and_never_ephemeral() -> None:
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    for _ in range(20):
        ports = free_udp_ports(16)
        assert len(set(ports)) == 16
        assert all(p < low or p > high for p in ports), (ports, low, high)
        assert UDP_PORT not in ports
        socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in ports]
        try:
            for s, p in zip(socks, ports):
                s.bind(("127.0.0.1", p))              # free: each one binds
        finally:
            for s in socks:
                s.close()
