"""Network namespaces and veth pairs for worker hosts, with guaranteed clean-up.

A `HostNet` is one namespace holding the host end of a veth pair; the other end stays in the root
namespace and becomes a switch port (`-i N@<switch_if>`).  Offloads are turned off on the host
end: UDP sent by a host's kernel through a raw-socket switch otherwise arrives with bad checksums.

Everything created is recorded in a `NetnsLab`; `close()` (also run by the context manager, on
errors and on signals handled by the caller) deletes every namespace and interface it made, and
only those.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

__all__ = ["NetnsError", "HostNet", "NetnsLab", "netns_available"]


class NetnsError(RuntimeError):
    pass


def _run(*argv: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def netns_available() -> str | None:
    """None when namespaces and veth pairs can be made here; otherwise the reason why not."""
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_NET_ADMIN"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    probe = f"nsprobe{os.getpid() % 100000}"
    try:
        _run("ip", "netns", "add", probe)
    except NetnsError as exc:
        return f"cannot create a network namespace: {exc}"
    try:
        _run("ip", "netns", "del", probe)
    except NetnsError:
        pass
    return None


@dataclass(frozen=True, slots=True)
class HostNet:
    name: str          # namespace name
    host_if: str       # interface inside the namespace
    switch_if: str     # interface in the root namespace (a switch port)
    mac: str
    ipv4: str          # without prefix length
    prefix_len: int

    def exec_argv(self, argv: list[str]) -> list[str]:
        """argv that runs `argv` inside this host's namespace."""
        return ["ip", "netns", "exec", self.name, *argv]


@dataclass
class NetnsLab:
    """Namespaces made by one run.  `tag` keeps names unique per run (interface names ≤ 15 chars)."""
    tag: str = field(default_factory=lambda: f"{os.getpid() % 10000:04d}")
    hosts: list[HostNet] = field(default_factory=list)
    _namespaces: list[str] = field(default_factory=list)
    _links: list[str] = field(default_factory=list)

    def add_host(self, index: int, mac: str, ipv4: str, prefix_len: int = 24,
                 arp: dict[str, str] | None = None, mtu: int = 0) -> HostNet:
        """`mtu`: both ends of the pair get it (0: the kernel's 1500), e.g. 9000 for the
        jumbo frames of K > 256."""
        ns = f"ns{self.tag}h{index}"
        host_if, switch_if = f"n{self.tag}h{index}", f"n{self.tag}s{index}"
        _run("ip", "netns", "add", ns)
        self._namespaces.append(ns)
        _run("ip", "link", "add", switch_if, "type", "veth", "peer", "name", host_if)
        self._links.append(switch_if)
        if mtu:
            _run("ip", "link", "set", switch_if, "mtu", str(mtu))
            _run("ip", "link", "set", host_if, "mtu", str(mtu))
        _run("ip", "link", "set", host_if, "netns", ns)
        inside = ["ip", "netns", "exec", ns]
        _run(*inside, "ip", "link", "set", host_if, "address", mac)
        _run(*inside, "ip", "addr", "add", f"{ipv4}/{prefix_len}", "dev", host_if)
        _run(*inside, "ip", "link", "set", host_if, "up")
        _run(*inside, "ip", "link", "set", "lo", "up")
        for flags in (("tx", "off", "rx", "off"),):
            if shutil.which("ethtool"):
                _run(*inside, "ethtool", "-K", host_if, *flags)
        for ip, hw in (arp or {}).items():
            _run(*inside, "ip", "neigh", "replace", ip, "lladdr", hw, "dev", host_if, "nud", "permanent")
        _run("ip", "link", "set", switch_if, "up")
        # The switch end must not answer IPv6 neighbour discovery or emit router solicitations
        # into the data plane; they are harmless but would show up in pcaps and counters.
        subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{switch_if}.disable_ipv6=1"],
                       capture_output=True)
        host = HostNet(ns, host_if, switch_if, mac, ipv4, prefix_len)
        self.hosts.append(host)
        return host

    def close(self) -> None:
        """Delete everything this lab made; keep going past individual failures."""
        for ns in reversed(self._namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for link in reversed(self._links):
            # Deleting the namespace usually took the pair with it; this catches the rest.
            subprocess.run(["ip", "link", "del", link], capture_output=True)
        self._namespaces.clear()
        self._links.clear()
        self.hosts.clear()

    def __enter__(self) -> "NetnsLab":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
