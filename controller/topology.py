"""The topology/job description file: switches, hosts (workers), links, jobs.

One file, shared by the controller, `netsum-ctl --topo` and the Mininet scripts, in YAML or
JSON (YAML is a superset; the suffix does not matter).  Every problem is reported with the path
of the bad item, e.g. `topo.yaml: hosts[2].mac: 'zz:00' is not a MAC address`.  See
docs/controller.md for the schema and examples/ for a two-level tree.

The loaded value is immutable (frozen dataclasses); derived questions (which switch port leads
to a host, which switches a job spans, who is a leaf's parent) are answered by methods.
"""
from __future__ import annotations

import enum
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from netsum.controller.document import DocumentError, load_document, read_text, show
from netsum.controller.errors import TopologyError
from netsum.wire import MAX_SLOTS, MAX_WORKERS, UDP_PORT

__all__ = ["Role", "Service", "Switch", "Host", "Link", "JobSpec", "Topology", "load_topology",
           "parse_topology"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_ADDR = re.compile(r"^[^\s:]+:\d{1,5}$")


class Role(enum.Enum):
    """A switch's place in an aggregation tree.  `single`: workers attach and the job ends
    here.  `leaf`: aggregates its local workers and forwards the partial sum to its parent.
    `root`: aggregates the leaves' partial sums (and any directly attached workers)."""
    SINGLE = "single"
    LEAF = "leaf"
    ROOT = "root"


@dataclass(frozen=True, slots=True)
class Service:
    """The aggregation service address a switch answers as (workers send DATA to it; RESULTs
    come from it)."""
    mac: int
    ipv4: int


@dataclass(frozen=True, slots=True)
class Switch:
    name: str
    grpc_addr: str
    device_id: int
    election_id: tuple[int, int]
    role: Role
    ports: tuple[int, ...]
    service: Service
    slots: int                 # size of this switch's slot pool (shared by its jobs)
    parent: str | None         # for a leaf: the switch it forwards partial sums to


@dataclass(frozen=True, slots=True)
class Host:
    name: str
    mac: int
    ipv4: int
    udp_port: int
    switch: str
    port: int


@dataclass(frozen=True, slots=True)
class Link:
    a: str
    a_port: int
    b: str
    b_port: int


@dataclass(frozen=True, slots=True)
class JobSpec:
    id: int
    workers: tuple[str, ...]
    slots: int


@dataclass(frozen=True, slots=True)
class Topology:
    switches: tuple[Switch, ...]
    hosts: tuple[Host, ...]
    links: tuple[Link, ...]
    jobs: tuple[JobSpec, ...]
    source: str = "<topology>"

    def switch(self, name: str) -> Switch:
        for s in self.switches:
            if s.name == name:
                return s
        raise TopologyError(f"{self.source}: no switch named {name!r} "
                            f"(switches: {', '.join(s.name for s in self.switches)})")

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise TopologyError(f"{self.source}: no host named {name!r}")

    def hosts_on(self, switch: str) -> tuple[Host, ...]:
        return tuple(h for h in self.hosts if h.switch == switch)

    def link_between(self, a: str, b: str) -> tuple[int, int]:
        """(port on a, port on b) of the link joining switches a and b."""
        for ln in self.links:
            if (ln.a, ln.b) == (a, b):
                return ln.a_port, ln.b_port
            if (ln.b, ln.a) == (a, b):
                return ln.b_port, ln.a_port
        raise TopologyError(f"{self.source}: no link between switches {a!r} and {b!r}")

    def children(self, switch: str) -> tuple[Switch, ...]:
        return tuple(s for s in self.switches if s.parent == switch)


# -- parsing ---------------------------------------------------------------------------------

def load_topology(path: str | Path) -> Topology:
    p = Path(path)
    try:
        text = read_text(p)
    except OSError as exc:
        raise TopologyError(f"cannot read topology file {str(p)!r}: "
                            f"{exc.strerror or exc}") from None
    except DocumentError as exc:
        raise TopologyError(f"{p}: {exc}") from None
    return parse_topology(text, str(p))


def parse_topology(text: str, source: str = "<topology>") -> Topology:
    """The topology in `text` (YAML or JSON), within controller/document.py's bounds."""
    try:
        doc = load_document(text)
    except DocumentError as exc:
        raise TopologyError(f"{source}: {exc}") from None
    return _Parser(source).document(doc)


class _Parser:
    """Validates the document; every error names `source: path.to[item]: problem`."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str) -> TopologyError:
        return TopologyError(f"{self.source}: {path}: {problem}")

    # -- scalars --
    def mapping(self, v: Any, path: str, required: tuple[str, ...],
                optional: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(path, f"expected a mapping, got {_kind(v)}")
        for k in required:
            if k not in v:
                raise self.fail(path, f"missing required key {show(k)}")
        extra = sorted(set(map(str, v)) - set(required) - set(optional))
        if extra:
            raise self.fail(path, f"unknown key {show(extra[0])} (allowed: "
                            f"{', '.join((*required, *optional))})")
        return v

    def seq(self, v: Any, path: str) -> list[Any]:
        if v is None:
            return []
        if not isinstance(v, list):
            raise self.fail(path, f"expected a list, got {_kind(v)}")
        return v

    def name(self, v: Any, path: str) -> str:
        if not isinstance(v, str) or not _NAME.match(v):
            raise self.fail(path, f"{show(v)} is not a valid name (letters, digits, _ . -)")
        return v

    def int_(self, v: Any, path: str, lo: int, hi: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(path, f"expected an integer, got {_kind(v)} {show(v)}")
        if not lo <= v <= hi:
            raise self.fail(path, f"{v} is out of range {lo}..{hi}")
        return v

    def mac(self, v: Any, path: str) -> int:
        if not isinstance(v, str) or not _MAC.match(v):
            raise self.fail(path, f"{show(v)} is not a MAC address (aa:bb:cc:dd:ee:ff)")
        return int(v.replace(":", ""), 16)

    def ipv4(self, v: Any, path: str) -> int:
        try:
            return int(ipaddress.IPv4Address(v if isinstance(v, str) else "x"))
        except ValueError:
            raise self.fail(path, f"{show(v)} is not an IPv4 address (a.b.c.d)") from None

    # -- document --
    def document(self, doc: Any) -> Topology:
        d = self.mapping(doc, "<top>", ("switches",), ("hosts", "links", "jobs"))
        switches = self.unique([self.switch(v, f"switches[{i}]")
                                for i, v in enumerate(self.seq(d["switches"], "switches"))],
                               "switches", lambda s: s.name)
        if not switches:
            raise self.fail("switches", "at least one switch is required")
        by_name = {s.name: s for s in switches}
        hosts = self.unique([self.host(v, f"hosts[{i}]", by_name)
                             for i, v in enumerate(self.seq(d.get("hosts"), "hosts"))],
                            "hosts", lambda h: h.name)
        self.unique(hosts, "hosts", lambda h: h.mac, "MAC", _fmt_mac)
        self.unique(hosts, "hosts", lambda h: (h.ipv4, h.udp_port), "IPv4 address/UDP port",
                    lambda k: f"{ipaddress.IPv4Address(k[0])}:{k[1]}")
        self.unique(hosts, "hosts", lambda h: (h.switch, h.port), "switch port",
                    lambda k: f"{k[0]} port {k[1]}")
        self.services(switches, hosts)
        links = [self.link(v, f"links[{i}]", by_name)
                 for i, v in enumerate(self.seq(d.get("links"), "links"))]
        used = {(h.switch, h.port): f"host {h.name}" for h in hosts}
        for i, ln in enumerate(links):
            for sw, port in ((ln.a, ln.a_port), (ln.b, ln.b_port)):
                if (sw, port) in used:
                    raise self.fail(f"links[{i}]", f"{sw} port {port} is already used by "
                                    f"{used[(sw, port)]}")
                used[(sw, port)] = f"links[{i}]"
        self.tree(switches, links)
        topo = Topology(tuple(switches), tuple(hosts), tuple(links), (), self.source)
        jobs = self.unique([self.job(v, f"jobs[{i}]", topo)
                            for i, v in enumerate(self.seq(d.get("jobs"), "jobs"))],
                           "jobs", lambda j: j.id, "id")
        return Topology(tuple(switches), tuple(hosts), tuple(links), tuple(jobs), self.source)

    def unique(self, items: list[Any], path: str, key: Callable[[Any], Any],
               what: str = "name", fmt: Callable[[Any], str] = str) -> list[Any]:
        seen: dict[Any, int] = {}
        for i, item in enumerate(items):
            k = key(item)
            if k in seen:
                raise self.fail(f"{path}[{i}]", f"duplicate {what} {fmt(k)} "
                                f"(also {path}[{seen[k]}])")
            seen[k] = i
        return items

    def services(self, switches: list[Switch], hosts: list[Host]) -> None:
        """A switch's service address is its own: the ARP answer and the `dmac` entry for it
        would otherwise shadow a host (or another switch), and a member keyed on a leaf's
        service address would match that host's packets."""
        owner: dict[tuple[str, int], str] = {}
        for i, s in enumerate(switches):
            for kind, value in (("MAC", s.service.mac), ("IPv4", s.service.ipv4)):
                other = owner.get((kind, value))
                if other is not None:
                    raise self.fail(f"switches[{i}].service.{kind.lower()}",
                                    f"{_fmt_addr(kind, value)} is also the service address of "
                                    f"switch {other}")
                owner[(kind, value)] = s.name
        for i, h in enumerate(hosts):
            for kind, value in (("MAC", h.mac), ("IPv4", h.ipv4)):
                other = owner.get((kind, value))
                if other is not None:
                    raise self.fail(f"hosts[{i}].{kind.lower()}",
                                    f"{_fmt_addr(kind, value)} is the service address of "
                                    f"switch {other} (a host needs an address of its own)")

    def switch(self, v: Any, path: str) -> Switch:
        d = self.mapping(v, path, ("name", "grpc_addr", "ports", "service"),
                         ("device_id", "election_id", "role", "slots", "parent"))
        name = self.name(d["name"], f"{path}.name")
        addr = d["grpc_addr"]
        if not isinstance(addr, str) or not _ADDR.match(addr):
            raise self.fail(f"{path}.grpc_addr", f"{show(addr)} is not host:port")
        device_id = self.int_(d.get("device_id", 0), f"{path}.device_id", 0, 2**64 - 1)
        el = d.get("election_id", [0, 1])
        if not isinstance(el, list) or len(el) != 2:
            raise self.fail(f"{path}.election_id", f"expected [high, low], got {show(el)}")
        election = (self.int_(el[0], f"{path}.election_id[0]", 0, 2**64 - 1),
                    self.int_(el[1], f"{path}.election_id[1]", 0, 2**64 - 1))
        role_text = d.get("role", "single")
        try:
            role = Role(role_text)
        except ValueError:
            raise self.fail(f"{path}.role", f"{show(role_text)} is not one of "
                            f"{', '.join(r.value for r in Role)}") from None
        ports = tuple(self.int_(p, f"{path}.ports[{i}]", 0, 510)
                      for i, p in enumerate(self.seq(d["ports"], f"{path}.ports")))
        if len(set(ports)) != len(ports):
            raise self.fail(f"{path}.ports", "a port is listed twice")
        svc = self.mapping(d["service"], f"{path}.service", ("mac", "ipv4"), ())
        service = Service(self.mac(svc["mac"], f"{path}.service.mac"),
                          self.ipv4(svc["ipv4"], f"{path}.service.ipv4"))
        slots = self.int_(d.get("slots", 1024), f"{path}.slots", 1, MAX_SLOTS)
        parent = d.get("parent")
        if parent is not None:
            parent = self.name(parent, f"{path}.parent")
        if role is Role.LEAF and parent is None:
            raise self.fail(f"{path}.parent", "a leaf switch needs a parent (its root)")
        if role is not Role.LEAF and parent is not None:
            raise self.fail(f"{path}.parent", f"only a leaf has a parent (role is {role.value})")
        return Switch(name, addr, device_id, election, role, ports, service, slots, parent)

    def host(self, v: Any, path: str, switches: Mapping[str, Switch]) -> Host:
        d = self.mapping(v, path, ("name", "mac", "ipv4", "switch", "port"), ("udp_port",))
        sw = d["switch"]
        if not isinstance(sw, str) or sw not in switches:
            raise self.fail(f"{path}.switch", f"no switch named {show(sw)}")
        port = self.int_(d["port"], f"{path}.port", 0, 510)
        if port not in switches[sw].ports:
            raise self.fail(f"{path}.port", f"port {port} is not one of {sw}'s ports "
                            f"{list(switches[sw].ports)}")
        return Host(self.name(d["name"], f"{path}.name"), self.mac(d["mac"], f"{path}.mac"),
                    self.ipv4(d["ipv4"], f"{path}.ipv4"),
                    self.int_(d.get("udp_port", UDP_PORT), f"{path}.udp_port", 1, 65535),
                    sw, port)

    def link(self, v: Any, path: str, switches: Mapping[str, Switch]) -> Link:
        # Written as ["s1:5", "s2:1"]: the same shape Mininet's addLink(s1, s2, port1, port2) has.
        ends = self.seq(v, path)
        if len(ends) != 2:
            raise self.fail(path, "a link joins two ends written \"switch:port\", got "
                            f"{show(v)}")
        parsed = []
        for i, end in enumerate(ends):
            m = re.match(r"^([^:]+):(\d+)$", end) if isinstance(end, str) else None
            if not m:
                raise self.fail(f"{path}[{i}]", f"{show(end)} is not \"switch:port\"")
            sw, port = m.group(1), int(m.group(2))
            if sw not in switches:
                raise self.fail(f"{path}[{i}]", f"no switch named {show(sw)}")
            if port not in switches[sw].ports:
                raise self.fail(f"{path}[{i}]", f"port {port} is not one of {sw}'s ports "
                                f"{list(switches[sw].ports)}")
            parsed.append((sw, port))
        if parsed[0][0] == parsed[1][0]:
            raise self.fail(path, "a link must join two different switches")
        return Link(parsed[0][0], parsed[0][1], parsed[1][0], parsed[1][1])

    def tree(self, switches: list[Switch], links: list[Link]) -> None:
        names = {s.name: s for s in switches}
        for i, s in enumerate(switches):
            if s.parent is None:
                continue
            p = names.get(s.parent)
            if p is None:
                raise self.fail(f"switches[{i}].parent", f"no switch named {show(s.parent)}")
            if p.role is not Role.ROOT:
                raise self.fail(f"switches[{i}].parent",
                                f"{p.name} is {p.role.value}; a leaf's parent must be a root")
            if not any({ln.a, ln.b} == {s.name, p.name} for ln in links):
                raise self.fail(f"switches[{i}].parent",
                                f"no link joins {s.name} and its parent {p.name}")

    def job(self, v: Any, path: str, topo: Topology) -> JobSpec:
        d = self.mapping(v, path, ("id", "workers", "slots"), ())
        job_id = self.int_(d["id"], f"{path}.id", 1, 0xFFFF)
        workers = tuple(self.seq(d["workers"], f"{path}.workers"))
        hosts = {h.name for h in topo.hosts}
        for i, w in enumerate(workers):
            if not isinstance(w, str) or w not in hosts:
                raise self.fail(f"{path}.workers[{i}]", f"no host named {show(w)}")
        if len(set(workers)) != len(workers):
            raise self.fail(f"{path}.workers", "a worker is listed twice")
        if not 1 <= len(workers) <= MAX_WORKERS:
            raise self.fail(f"{path}.workers", f"a job has 1..{MAX_WORKERS} workers, "
                            f"got {len(workers)}")
        slots = self.int_(d["slots"], f"{path}.slots", 1, MAX_SLOTS)
        return JobSpec(job_id, workers, slots)


def _kind(v: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing"}.get(
        type(v), type(v).__name__)


def _fmt_addr(kind: str, v: int) -> str:
    return _fmt_mac(v) if kind == "MAC" else str(ipaddress.IPv4Address(v))


def _fmt_mac(v: int) -> str:
    return ":".join(f"{b:02x}" for b in v.to_bytes(6, "big"))
