"""The rig's network layout: which switches, which host on which switch port, which links.

Owns the addressing plan of a run and the topology file it becomes (netsum.controller.topology's
format, docs/controller.md): one switch `s1` with the workers on ports 1..N, or a two-level
tree (SHARP style) with the workers dealt round-robin over `leaves` leaf switches, each leaf's
uplink on its last port, and the root's downlinks on ports 1..leaves.  `bystanders` are further
hosts on ports N+1.. of the single switch that take part in no job (isolation tests: a host on
a non-member port).  Pure: no processes.
"""
from __future__ import annotations

from dataclasses import dataclass

from netsum.wire import UDP_PORT

__all__ = ["SwitchPlan", "HostPlan", "Layout", "plan_layout", "topology_doc", "SINGLE_SERVICE"]

#: The single switch's service address sits in the hosts' /24: in netns mode the workers'
#: kernels reach it on-link (the rig installs a permanent neighbour entry for it).
SINGLE_SERVICE = ("02:00:00:00:01:00", "10.0.0.254")
SUBNET_PREFIX = 24


@dataclass(frozen=True, slots=True)
class HostPlan:
    rank: int
    name: str
    mac: str
    ipv4: str
    switch: str
    port: int


@dataclass(frozen=True, slots=True)
class SwitchPlan:
    name: str
    role: str                          # single | leaf | root (netsum.controller.topology.Role)
    parent: str | None
    service_mac: str
    service_ip: str
    host_ports: tuple[int, ...]
    # switch-to-switch ports: (this port, peer switch, peer port)
    links: tuple[tuple[int, str, int], ...] = ()

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(sorted((*self.host_ports, *(p for p, _, _ in self.links))))


@dataclass(frozen=True, slots=True)
class Layout:
    switches: tuple[SwitchPlan, ...]
    hosts: tuple[HostPlan, ...]          # the workers, in rank order
    bystanders: tuple[HostPlan, ...] = ()

    def switch(self, name: str) -> SwitchPlan:
        return next(s for s in self.switches if s.name == name)

    @property
    def is_tree(self) -> bool:
        return len(self.switches) > 1


def _mac(i: int) -> str:
    return f"02:00:00:00:00:{i:02x}"


def plan_layout(workers: int, leaves: int = 0, bystanders: int = 0) -> Layout:
    """`leaves` = 0: one switch; >= 2: a root and that many leaves (each with a worker)."""
    if leaves == 0:
        every = [HostPlan(r, f"h{r + 1}", _mac(r + 1), f"10.0.0.{r + 1}", "s1", r + 1)
                 for r in range(workers + bystanders)]
        mac, ip = SINGLE_SERVICE
        return Layout((SwitchPlan("s1", "single", None, mac, ip,
                                  tuple(h.port for h in every)),), tuple(every[:workers]),
                      tuple(every[workers:]))
    if bystanders:
        raise ValueError("bystander hosts sit on the single switch (no tree)")
    if not 2 <= leaves <= workers:
        raise ValueError(f"a tree needs 2..{workers} leaves (one worker each at least), "
                         f"got {leaves}")
    hosts_l: list[HostPlan] = []
    per_leaf: dict[int, list[int]] = {i: [] for i in range(1, leaves + 1)}
    for r in range(workers):
        leaf = r % leaves + 1
        port = len(per_leaf[leaf]) + 1
        per_leaf[leaf].append(port)
        hosts_l.append(HostPlan(r, f"h{r + 1}", _mac(r + 1), f"10.0.0.{r + 1}",
                                f"leaf{leaf}", port))
    switches = [SwitchPlan("root", "root", None, "02:00:00:00:01:00", "10.0.1.254", (),
                           tuple((i, f"leaf{i}", len(per_leaf[i]) + 1)
                                 for i in range(1, leaves + 1)))]
    for i in range(1, leaves + 1):
        uplink = len(per_leaf[i]) + 1
        switches.append(SwitchPlan(f"leaf{i}", "leaf", "root", f"02:00:00:00:01:{i:02x}",
                                   f"10.0.1.{i}", tuple(per_leaf[i]), ((uplink, "root", i),)))
    return Layout(tuple(switches), tuple(hosts_l))


def topology_doc(layout: Layout, grpc_addrs: dict[str, str], pool_slots: int) -> dict[str, object]:
    """The topology file (netsum.controller.topology's format) for `layout`; no jobs (the rig
    creates them one by one)."""
    links = []
    for s in layout.switches:
        for port, peer, peer_port in s.links:
            if s.role == "leaf":
                links.append([f"{s.name}:{port}", f"{peer}:{peer_port}"])
    switches = []
    for s in layout.switches:
        doc: dict[str, object] = {"name": s.name, "grpc_addr": grpc_addrs[s.name],
                                  "device_id": 0, "role": s.role, "ports": list(s.ports),
                                  "service": {"mac": s.service_mac, "ipv4": s.service_ip},
                                  "slots": pool_slots}
        if s.parent is not None:
            doc["parent"] = s.parent
        switches.append(doc)
    out: dict[str, object] = {
        "switches": switches,
        "hosts": [{"name": h.name, "mac": h.mac, "ipv4": h.ipv4, "udp_port": UDP_PORT,
                   "switch": h.switch, "port": h.port}
                  for h in (*layout.hosts, *layout.bystanders)],
        "jobs": [],
    }
    if links:
        out["links"] = links
    return out
