"""Planning: what each switch must hold for forwarding and for each job.  Pure (no I/O).

A job's workers decide its shape.  All on one switch: that switch aggregates and multicasts
(role root for this job, whatever its role in the topology).  Spread over leaves of one root:
each leaf aggregates its local workers and sends the partial sum up (`job_leaf`), the root
aggregates the leaves' partials and any workers attached to it directly (`job_root`), multicasts
the result down, and each leaf stores and multicasts it to its workers.  The member table turns
a contributor's (switch port, IPv4 source, Ethernet source) into its bit, so a host on another
port cannot pass for it; a leaf is its parent's contributor on the parent's port towards it,
under its service address.  RESULTs of the job may leave only on its contributors' ports
(`result_port`).  Every switch a job touches gets a slot range of the job's size (ranges may
differ per switch; slot indices in packets are relative to the range).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from netsum.controller import program as P
from netsum.controller.errors import JobError
from netsum.controller.slots import SlotRange
from netsum.controller.topology import Host, JobSpec, Role, Switch, Topology
from netsum.p4rt.entities import TableEntry
from netsum.p4rt.pre import MulticastGroup
from netsum.p4rt.schema import Schema
from netsum.wire import MAX_WORKERS, RANK_SWITCH, UDP_PORT

__all__ = ["Contributor", "Placement", "JobPlan", "place_job", "plan_job", "member_entry",
           "plan_forwarding", "plan_service_sources", "plan_drop", "next_hop_ports"]


@dataclass(frozen=True, slots=True)
class Contributor:
    """A sender whose DATA the switch aggregates, and where its RESULT copy goes."""
    name: str
    mac: int
    ipv4: int
    udp_port: int
    port: int          # the switch port towards it
    # protocol v2: its rank in the job (position in the job's worker list), which a
    # reduce-scatter RESULT's dest names; a leaf switch is RANK_SWITCH (always the values)
    rank: int = RANK_SWITCH


@dataclass(frozen=True, slots=True)
class Placement:
    switch: str
    role: Role                         # ROOT or LEAF for this job
    contributors: tuple[Contributor, ...]
    parent: str | None = None          # for a leaf


@dataclass(frozen=True, slots=True)
class JobPlan:
    """Everything one switch holds for one job."""
    switch: str
    role: Role
    slots: SlotRange
    entries: tuple[TableEntry, ...]    # job entry; members; replicas; result ports
    group: MulticastGroup


def place_job(topo: Topology, spec: JobSpec) -> dict[str, Placement]:
    hosts = [topo.host(w) for w in spec.workers]
    rank = {w: r for r, w in enumerate(spec.workers)}

    def _host_contributor(h: Host) -> Contributor:
        return Contributor(h.name, h.mac, h.ipv4, h.udp_port, h.port, rank[h.name])

    by_switch: dict[str, list[Host]] = {}
    for h in hosts:
        by_switch.setdefault(h.switch, []).append(h)
    if len(by_switch) == 1:
        (name, local), = by_switch.items()
        return {name: Placement(name, Role.ROOT, tuple(map(_host_contributor, local)))}
    roots = set()
    for name in by_switch:
        sw = topo.switch(name)
        roots.add(sw.parent if sw.role is Role.LEAF else (name if sw.role is Role.ROOT else None))
    if len(roots) != 1 or None in roots:
        raise JobError(f"job {spec.id}: its workers sit on switches "
                       f"{', '.join(sorted(by_switch))}, which are not leaves of one root "
                       "(a job spans one switch or one two-level tree)")
    root_name = roots.pop()
    assert root_name is not None
    out: dict[str, Placement] = {}
    up: list[Contributor] = []
    for name, local in sorted(by_switch.items()):
        if name == root_name:
            continue
        leaf = topo.switch(name)
        out[name] = Placement(name, Role.LEAF, tuple(map(_host_contributor, local)), root_name)
        down_port, _ = topo.link_between(root_name, name)
        up.append(Contributor(name, leaf.service.mac, leaf.service.ipv4, UDP_PORT, down_port))
    direct = tuple(map(_host_contributor, by_switch.get(root_name, [])))
    out[root_name] = Placement(root_name, Role.ROOT, direct + tuple(up))
    return out


def plan_job(topo: Topology, schema: Schema, spec: JobSpec, place: Placement,
             slots: SlotRange) -> JobPlan:
    """Entries and the multicast group for `spec` on one switch."""
    if len(place.contributors) > MAX_WORKERS:
        raise JobError(f"job {spec.id}: {len(place.contributors)} contributors on "
                       f"{place.switch}; the worker bitmap holds {MAX_WORKERS}")
    limit = P.max_jobs(schema)
    if not 1 <= spec.id < limit:
        raise JobError(f"job id {spec.id} is out of range 1..{limit - 1} (the program's per-job "
                       f"counters have {limit} cells)")
    mgid = P.job_mgid(spec.id)
    common = {"slot_base": slots.base, "num_slots": slots.count,
              "num_workers": len(place.contributors), "mgid": mgid,
              # protocol v2: the member count every DATA of the job says (all leaves')
              "job_workers": len(spec.workers)}
    if place.role is Role.LEAF:
        assert place.parent is not None
        me, parent = topo.switch(place.switch), topo.switch(place.parent)
        up_port, _ = topo.link_between(place.switch, place.parent)
        job = P.entry(schema, P.JOB, {"job_id": spec.id}, "job_leaf",
                      _v2(schema, P.JOB, "job_leaf", {
                          **common, "up_port": up_port, "leaf_mac": me.service.mac,
                          "leaf_addr": me.service.ipv4, "up_mac": parent.service.mac,
                          "up_addr": parent.service.ipv4}))
    else:
        job = P.entry(schema, P.JOB, {"job_id": spec.id}, "job_root",
                      _v2(schema, P.JOB, "job_root", common))
    entries = [job]
    replicas = []
    for i, c in enumerate(place.contributors):
        entries.append(member_entry(schema, spec.id, c, 1 << i))
        rid = P.replica_rid(spec.id, i)
        replicas.append((c.port, rid))
    for (port, rid), c in zip(replicas, place.contributors):
        entries.append(P.entry(schema, P.REPLICA, {"egress_rid": rid, "egress_port": port},
                               "set_replica", _v2(schema, P.REPLICA, "set_replica", {
                                   "dst_mac": c.mac, "dst_addr": c.ipv4,
                                   "dst_port": c.udp_port, "rank": c.rank})))
    if P.RESULT_PORT in schema.tables.by_name:
        for port in sorted({c.port for c in place.contributors}):
            entries.append(P.entry(schema, P.RESULT_PORT, {"job_id": spec.id,
                                                           "egress_port": port}, "allow_result"))
    return JobPlan(place.switch, place.role, slots, tuple(entries),
                   MulticastGroup(mgid, tuple(replicas)))


def member_entry(schema: Schema, job_id: int, c: Contributor, worker_bit: int) -> TableEntry:
    """`member`: (job, the switch port towards the contributor, its IPv4 and MAC source) ->
    its bit.  Key fields by full name: two of them end in `srcAddr`."""
    return P.entry(schema, P.MEMBER, {"hdr.netsum.job_id": job_id,
                                      "standard_metadata.ingress_port": c.port,
                                      "hdr.ipv4.srcAddr": c.ipv4,
                                      "hdr.ethernet.srcAddr": c.mac},
                   "set_member", _v2(schema, P.MEMBER, "set_member",
                                     {"worker_bit": worker_bit, "rank": c.rank}))


#: Parameters protocol v2 added to the job and member actions: left out when the running
#: program's action does not take them (a build of netsum.p4 before v2, e.g. real p4c's
#: fixtures), so the controller still plans and checks against it.
V2_PARAMS = ("job_workers", "rank")


def _v2(schema: Schema, table: str, action: str, params: dict[str, int]) -> dict[str, int]:
    declared = {p.name for p in schema.table_action(schema.table(table), action).params}
    return {k: v for k, v in params.items() if k in declared or k not in V2_PARAMS}


def next_hop_ports(topo: Topology, switch: str) -> dict[str, int]:
    """For every other switch, the port of `switch` on the shortest path towards it."""
    adj: dict[str, list[tuple[str, int]]] = {}
    for ln in topo.links:
        adj.setdefault(ln.a, []).append((ln.b, ln.a_port))
        adj.setdefault(ln.b, []).append((ln.a, ln.b_port))
    first: dict[str, int] = {}
    seen = {switch}
    todo: deque[tuple[str, int | None]] = deque([(switch, None)])
    while todo:
        here, via = todo.popleft()
        for there, port in adj.get(here, []):
            if there not in seen:
                seen.add(there)
                hop = port if via is None else via
                first[there] = hop
                todo.append((there, hop))
    return first


def plan_forwarding(topo: Topology, schema: Schema,
                    sw: Switch) -> tuple[list[TableEntry], list[MulticastGroup]]:
    """L2 forwarding towards every host and service address, the flood group, and ARP
    answers for this switch's service address."""
    hops = next_hop_ports(topo, sw.name)
    entries = []
    for h in topo.hosts:
        port = h.port if h.switch == sw.name else hops.get(h.switch)
        if port is not None:
            entries.append(P.entry(schema, P.DMAC, {"dstAddr": h.mac}, "forward", {"port": port}))
    for other in topo.switches:
        if other.name != sw.name and other.name in hops:
            entries.append(P.entry(schema, P.DMAC, {"dstAddr": other.service.mac}, "forward",
                                   {"port": hops[other.name]}))
    entries.append(P.entry(schema, P.ARP, {"tpa": sw.service.ipv4}, "arp_reply",
                           {"mac": sw.service.mac}))
    entries += plan_service_sources(topo, schema, sw)
    flood = MulticastGroup(P.FLOOD_MGID, tuple((p, 0) for p in sw.ports))
    return entries, [flood]


def plan_service_sources(topo: Topology, schema: Schema, sw: Switch) -> list[TableEntry]:
    """protocol v2 anti-spoofing (p4/README.md, `service_src`): the switch's own service
    address, which no frame from outside may carry as its source, and a leaf's parent's, which
    arrives on the uplink only.  Nothing when the running program has no such table."""
    if P.SERVICE_SRC not in schema.tables.by_name:
        return []
    out = [P.entry(schema, P.SERVICE_SRC, {"srcAddr": sw.service.ipv4}, "own_service")]
    if sw.parent is not None:
        up_port, _ = topo.link_between(sw.name, sw.parent)
        out.append(P.entry(schema, P.SERVICE_SRC, {"srcAddr": topo.switch(sw.parent).service.ipv4},
                           "parent_service", {"port": up_port}))
    return out


def plan_drop(schema: Schema, port: int, probability: float, direction: str) -> list[TableEntry]:
    """Drop-simulator entries for a port: the rate action with the threshold for
    `probability`, or the pass-all action for 0 (an explicit entry, so "set to 0" is visible in dumps)."""
    tables = {"in": [P.DROP_SIM_IN], "out": [P.DROP_SIM_OUT],
              "both": [P.DROP_SIM_IN, P.DROP_SIM_OUT]}[direction]
    out = []
    for t in tables:
        key_name = schema.table(t).match_fields[0].name.rsplit(".", 1)[-1]
        set_rate, pass_all = P.DROP_ACTIONS[t]
        if probability == 0:
            out.append(P.entry(schema, t, {key_name: port}, pass_all))
        else:
            out.append(P.entry(schema, t, {key_name: port}, set_rate,
                               {"threshold": P.drop_threshold(probability)}))
    return out
