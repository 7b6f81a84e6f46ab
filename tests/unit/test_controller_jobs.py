"""Job placement and planning (pure) against the netsum control-plane contract of p4/README.md.

The contract is written down here as data (`CONTRACT`) and turned into a P4Info, so planning is
tested without a build; `test_contract_matches_the_build` checks the table against the compiled
program's P4Info, so the two cannot drift apart unnoticed.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from p4.config.v1 import p4info_pb2

from netsum.controller import program as P
from netsum.controller.errors import JobError
from netsum.controller.jobs import next_hop_ports, place_job, plan_drop, plan_forwarding, plan_job
from netsum.controller.slots import SlotRange
from netsum.controller.topology import JobSpec, Role, Topology, load_topology
from netsum.match import Exact
from netsum.p4rt.entities import TableEntry
from netsum.p4rt.schema import Schema
from netsum.wire import RANK_SWITCH

ROOT = Path(__file__).resolve().parents[2]

# table -> (key fields [(name, width)], {action: [(param, width)]})
CONTRACT: dict[str, tuple[list[tuple[str, int]], dict[str, list[tuple[str, int]]]]] = {
    "NetsumIngress.dmac": ([("hdr.ethernet.dstAddr", 48)],
                           {"forward": [("port", 9)], "broadcast": [("mgid", 16)], "drop": []}),
    "NetsumIngress.arp_responder": ([("hdr.arp.tpa", 32)], {"arp_reply": [("mac", 48)]}),
    "NetsumIngress.service_src": ([("hdr.ipv4.srcAddr", 32)],
                                  {"own_service": [], "parent_service": [("port", 9)]}),
    "NetsumIngress.drop_sim_in": ([("standard_metadata.ingress_port", 9)],
                                  {"set_drop_in": [("threshold", 16)], "no_drop_in": []}),
    "NetsumIngress.job": ([("hdr.netsum.job_id", 16)], {
        "job_root": [("slot_base", 16), ("num_slots", 16), ("num_workers", 8), ("mgid", 16),
                     ("job_workers", 8)],
        "job_leaf": [("slot_base", 16), ("num_slots", 16), ("num_workers", 8), ("mgid", 16),
                     ("up_port", 9), ("leaf_mac", 48), ("leaf_addr", 32), ("up_mac", 48),
                     ("up_addr", 32), ("job_workers", 8)],
        "unknown_job": []}),
    "NetsumIngress.member": ([("hdr.netsum.job_id", 16), ("standard_metadata.ingress_port", 9),
                              ("hdr.ipv4.srcAddr", 32), ("hdr.ethernet.srcAddr", 48)],
                             {"set_member": [("worker_bit", 32), ("rank", 8)],
                              "non_member": []}),
    "NetsumIngress.job_epoch": ([("hdr.netsum.job_id", 16)], {"set_epoch": [("epoch", 16)]}),
    "NetsumEgress.replica": ([("standard_metadata.egress_rid", 16),
                              ("standard_metadata.egress_port", 9)],
                             {"set_replica": [("dst_mac", 48), ("dst_addr", 32),
                                              ("dst_port", 16), ("rank", 8)]}),
    "NetsumEgress.result_port": ([("hdr.netsum.job_id", 16), ("standard_metadata.egress_port", 9)],
                                 {"allow_result": [], "refuse_result": []}),
    "NetsumEgress.drop_sim_out": ([("standard_metadata.egress_port", 9)],
                                  {"set_drop_out": [("threshold", 16)], "no_drop_out": []}),
}
COUNTERS = {name: 256 for _, name in P.JOB_COUNTERS}


def contract_p4info(contract: dict | None = None) -> p4info_pb2.P4Info:  # type: ignore[type-arg]
    info = p4info_pb2.P4Info()
    next_id = iter(range(1, 1000))
    for tname, (keys, actions) in (CONTRACT if contract is None else contract).items():
        t = info.tables.add()
        t.preamble.id = 0x02000000 | next(next_id)
        t.preamble.name, t.preamble.alias = tname, tname.split(".")[-1]
        for i, (k, w) in enumerate(keys, 1):
            t.match_fields.add(id=i, name=k, bitwidth=w, match_type=p4info_pb2.MatchField.EXACT)
        for aname, params in actions.items():
            a = info.actions.add()
            a.preamble.id = 0x01000000 | next(next_id)
            a.preamble.name = f"{tname.split('.')[0]}.{aname}"
            a.preamble.alias = aname
            for i, (p, w) in enumerate(params, 1):
                a.params.add(id=i, name=p, bitwidth=w)
            t.action_refs.add(id=a.preamble.id)
    for cname, size in COUNTERS.items():
        c = info.counters.add()
        c.preamble.id = 0x12000000 | next(next_id)
        c.preamble.name, c.preamble.alias = cname, cname.split(".")[-1]
        c.size = size
    return info


@pytest.fixture(scope="module")
def schema() -> Schema:
    return Schema(contract_p4info())


@pytest.fixture(scope="module")
def tree() -> Topology:
    return load_topology(ROOT / "examples" / "tree.yaml")


def params(schema: Schema, e: TableEntry) -> dict[str, int]:
    a = schema.action(e.action)
    return {p.name: v for p, v in zip(a.params, e.params)}


def test_job_on_one_switch_is_a_root_there(tree: Topology) -> None:
    places = place_job(tree, JobSpec(5, ("h1", "h2"), 8))
    assert list(places) == ["leaf1"] and places["leaf1"].role is Role.ROOT


def test_job_across_leaves(tree: Topology, schema: Schema) -> None:
    spec = tree.jobs[0]                      # h1..h4 on leaf1 and leaf2
    places = place_job(tree, spec)
    assert {n: p.role for n, p in places.items()} == {
        "leaf1": Role.LEAF, "leaf2": Role.LEAF, "root": Role.ROOT}
    root = plan_job(tree, schema, spec, places["root"], SlotRange(100, 256))
    job = root.entries[0]
    assert schema.action(job.action).alias == "job_root"
    # the root waits for two contributors (the leaves); every DATA says the job's 4 members
    assert params(schema, job) == {"slot_base": 100, "num_slots": 256, "num_workers": 2,
                                   "mgid": P.job_mgid(1), "job_workers": 4}
    members = [e for e in root.entries if e.table == P.MEMBER]
    leaf_ips = [tree.switch(n).service.ipv4 for n in ("leaf1", "leaf2")]
    leaf_macs = [tree.switch(n).service.mac for n in ("leaf1", "leaf2")]
    # A leaf is a member at the root only on the root's port towards it (1 and 2 in tree.yaml).
    assert [e.match for e in members] == [
        (("hdr.netsum.job_id", Exact(1)), ("standard_metadata.ingress_port", Exact(port)),
         ("hdr.ipv4.srcAddr", Exact(ip)), ("hdr.ethernet.srcAddr", Exact(mac)))
        for port, ip, mac in zip((1, 2), leaf_ips, leaf_macs)]
    assert [params(schema, e)["worker_bit"] for e in members] == [1, 2]
    # a leaf is no rank of the job: it always gets the values (its egress decides per worker)
    assert [params(schema, e)["rank"] for e in members] == [RANK_SWITCH, RANK_SWITCH]
    # RESULTs of the job leave the root on those two ports only.
    assert [tuple(v.value for _, v in e.match) for e in root.entries
            if e.table == P.RESULT_PORT] == [(1, 1), (1, 2)]
    # Results go down to each leaf's service address, out of the root's port towards it.
    assert root.group.replicas == ((1, P.replica_rid(1, 0)), (2, P.replica_rid(1, 1)))
    reps = [params(schema, e) for e in root.entries if e.table == P.REPLICA]
    assert reps[1] == {"dst_mac": tree.switch("leaf2").service.mac, "dst_addr": leaf_ips[1],
                       "dst_port": 0x6E73, "rank": RANK_SWITCH}

    leaf = plan_job(tree, schema, spec, places["leaf2"], SlotRange(0, 256))
    lp = params(schema, leaf.entries[0])
    assert schema.action(leaf.entries[0].action).alias == "job_leaf"
    assert lp["up_port"] == 3 and lp["num_workers"] == 2 and lp["job_workers"] == 4
    assert (lp["leaf_mac"], lp["leaf_addr"]) == (tree.switch("leaf2").service.mac, leaf_ips[1])
    assert lp["up_addr"] == tree.switch("root").service.ipv4
    h3 = tree.host("h3")
    # h3 is the job's third worker: rank 2, at the leaf as in its DATA's dest
    assert params(schema, [e for e in leaf.entries if e.table == P.REPLICA][0]) == {
        "dst_mac": h3.mac, "dst_addr": h3.ipv4, "dst_port": h3.udp_port, "rank": 2}
    # At the leaf, h3 is a member on its own port, under its own IPv4 and MAC.
    m = [e for e in leaf.entries if e.table == P.MEMBER][0]
    assert [v.value for _, v in m.match] == [1, h3.port, h3.ipv4, h3.mac]
    assert params(schema, m) == {"worker_bit": 1, "rank": 2}


def test_rids_are_distinct_per_switch_and_never_the_flood_rid(tree: Topology,
                                                              schema: Schema) -> None:
    rids = set()
    for spec in tree.jobs:
        for name, place in place_job(tree, spec).items():
            plan = plan_job(tree, schema, spec, place, SlotRange(0, spec.slots))
            for _, rid in plan.group.replicas:
                assert rid != 0 and (name, rid) not in rids
                rids.add((name, rid))


@pytest.mark.parametrize("spec, message", [
    (JobSpec(0, ("h1",), 4), "job id 0 is out of range 1..255"),
    (JobSpec(256, ("h1",), 4), "job id 256 is out of range 1..255"),
])
def test_job_id_range(tree: Topology, schema: Schema, spec: JobSpec, message: str) -> None:
    place = place_job(tree, spec)["leaf1"]
    with pytest.raises(JobError, match=message):
        plan_job(tree, schema, spec, place, SlotRange(0, 4))


def test_job_across_unrelated_switches_is_refused() -> None:
    topo = load_topology(ROOT / "examples" / "tree.yaml")
    from dataclasses import replace
    s = [replace(sw, role=Role.SINGLE, parent=None) if sw.name == "leaf2" else sw
         for sw in topo.switches]
    topo = replace(topo, switches=tuple(s))
    with pytest.raises(JobError, match="not leaves of one root"):
        place_job(topo, JobSpec(9, ("h1", "h3"), 4))


def test_forwarding(tree: Topology, schema: Schema) -> None:
    assert next_hop_ports(tree, "leaf1") == {"root": 3, "leaf2": 3}
    entries, groups = plan_forwarding(tree, schema, tree.switch("root"))
    dmac = {e.match[0][1].value: params(schema, e)["port"]  # type: ignore[union-attr]
            for e in entries if e.table == P.DMAC}
    assert dmac[tree.host("h1").mac] == 1 and dmac[tree.host("h4").mac] == 2
    arp = [e for e in entries if e.table == P.ARP]
    assert params(schema, arp[0]) == {"mac": tree.switch("root").service.mac}
    assert groups[0].mgid == P.FLOOD_MGID and groups[0].replicas == ((1, 0), (2, 0))


def test_service_sources(tree: Topology, schema: Schema) -> None:
    """service_src: each switch's own service address; a leaf also its parent's, accepted on
    the uplink only (tree.yaml: leaf2's port 3)."""
    def service(name: str) -> list[tuple[int, str, dict[str, int]]]:
        entries, _ = plan_forwarding(tree, schema, tree.switch(name))
        return [(e.match[0][1].value, schema.action(e.action).alias, params(schema, e))  # type: ignore[union-attr]
                for e in entries if e.table == P.SERVICE_SRC]
    assert service("root") == [(tree.switch("root").service.ipv4, "own_service", {})]
    assert service("leaf2") == [(tree.switch("leaf2").service.ipv4, "own_service", {}),
                                (tree.switch("root").service.ipv4, "parent_service",
                                 {"port": 3})]


@pytest.mark.parametrize("current, following", [(0, 1), (1, 2), (0xFFFE, 0xFFFF), (0xFFFF, 1)])
def test_next_epoch_never_returns_to_the_default(current: int, following: int) -> None:
    assert P.next_epoch(current) == following


@pytest.mark.parametrize("probability, direction, want", [
    (0.1, "in", [("NetsumIngress.drop_sim_in", "set_drop_in", (6554,))]),
    (1.0, "out", [("NetsumEgress.drop_sim_out", "set_drop_out", (65535,))]),
    (0.0, "both", [("NetsumIngress.drop_sim_in", "no_drop_in", ()),
                   ("NetsumEgress.drop_sim_out", "no_drop_out", ())]),
])
def test_drop_entries(schema: Schema, probability: float, direction: str, want: list) -> None:
    got = plan_drop(schema, 3, probability, direction)
    assert [(e.table, schema.action(e.action).alias, e.params) for e in got] == want
    assert all(e.match[0][1] == Exact(3) for e in got)


def test_contract_matches_the_build() -> None:
    """The contract above equals what the compiled netsum.p4 declares (names, widths, order)."""
    from netsum import build
    try:
        _, info_path = build.ensure_built(k=32)
    except build.BuildError as exc:
        pytest.skip(f"netsum.p4 cannot be built here: {exc}")
    from netsum.p4rt.schema import load_p4info
    real = Schema(load_p4info(info_path))
    for tname, (keys, actions) in CONTRACT.items():
        t = real.table(tname)
        assert [(f.name, f.bitwidth) for f in t.match_fields] == keys, tname
        for aname, ps in actions.items():
            a = real.table_action(t, aname)
            assert [(p.name, p.bitwidth) for p in a.params] == ps, aname
    for cname in COUNTERS:
        assert real.counter(cname).size == 256


def test_workers_on_the_root_and_on_leaves(schema: Schema) -> None:
    """A worker attached to the root directly is one more contributor there, beside the leaves."""
    import yaml
    doc = yaml.safe_load((ROOT / "examples" / "tree.yaml").read_text())
    doc["switches"][0]["ports"] = [1, 2, 3]
    doc["hosts"].append({"name": "h5", "mac": "02:00:00:00:00:05", "ipv4": "10.0.0.5",
                         "switch": "root", "port": 3})
    from netsum.controller.topology import parse_topology
    topo = parse_topology(yaml.safe_dump(doc))
    places = place_job(topo, JobSpec(4, ("h1", "h5", "h4"), 16))
    assert [c.name for c in places["root"].contributors] == ["h5", "leaf1", "leaf2"]
    assert [c.name for c in places["leaf1"].contributors] == ["h1"]
    plan = plan_job(topo, schema, JobSpec(4, ("h1", "h5", "h4"), 16), places["root"],
                    SlotRange(0, 16))
    assert params(schema, plan.entries[0])["num_workers"] == 3
    assert plan.group.replicas == tuple(sorted(((3, P.replica_rid(4, 0)), (1, P.replica_rid(4, 1)),
                                                (2, P.replica_rid(4, 2)))))


def test_a_program_before_protocol_v2_is_still_planned(tree: Topology) -> None:
    """Against a netsum.p4 build without v2's action parameters (real p4c's fixtures of the
    program before v2), jobs are planned without job_workers and rank instead of failing."""
    import copy
    old = copy.deepcopy(CONTRACT)
    for table, action in (("NetsumIngress.job", "job_root"), ("NetsumIngress.job", "job_leaf"),
                          ("NetsumIngress.member", "set_member"),
                          ("NetsumEgress.replica", "set_replica")):
        old[table][1][action] = [p for p in old[table][1][action]
                                 if p[0] not in ("job_workers", "rank")]
    schema = Schema(contract_p4info(old))
    spec = tree.jobs[0]
    places = place_job(tree, spec)
    plan = plan_job(tree, schema, spec, places["leaf1"], SlotRange(0, 256))
    assert "job_workers" not in params(schema, plan.entries[0])
    assert [set(params(schema, e)) for e in plan.entries if e.table == P.MEMBER] == \
        [{"worker_bit"}, {"worker_bit"}]
