"""The controller driving the netsum program on embedded switches over real gRPC: forwarding,
job lifecycle, slot exhaustion, a two-level tree configured from one topology file and proved by
a round of aggregation through three switches, rollback across switches, and a switch restart
after which the controller restores everything (checked by reads and by packets)."""
from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from netsum.controller import ops
from netsum.controller import program as P
from netsum.controller.cli import main
from netsum.controller.errors import ControllerError
from netsum.controller.fabric import Controller, load_program
from netsum.controller.jobs import Contributor, member_entry
from netsum.controller.topology import Topology, parse_topology
from netsum.p4rt.client import Endpoint, SwitchClient
from netsum.p4rt.schema import Schema, load_p4info
from helpers import built_netsum
from netsum.switch.device import Device
from netsum.switch.p4rt.server import P4RuntimeServer
from netsum.wire import K_DEFAULT, MsgType, Flags
from netsum.workers import wire

ROOT = Path(__file__).resolve().parents[2]
K = K_DEFAULT


@pytest.fixture(scope="module")
def netsum_program() -> tuple[Path, Path]:
    return built_netsum(K)


class Sw:
    """An embedded switch with its P4Runtime server on a free loopback port."""

    def __init__(self, port: int = 0) -> None:
        self.dev = Device(device_id=0)
        self.srv = P4RuntimeServer(self.dev, f"127.0.0.1:{port}").start()
        self.port = self.srv.port

    def restart(self) -> None:
        """Kill and start again on the same address: a fresh, empty switch."""
        self.srv.stop(None)
        self.__init__(self.port)  # type: ignore[misc]

    def stop(self) -> None:
        self.srv.stop(None)


@pytest.fixture
def switches() -> Iterator[dict[str, Sw]]:
    made: dict[str, Sw] = {}
    try:
        yield made
    finally:
        for s in made.values():
            s.stop()


def topology(example: str, switches: dict[str, Sw], tmp_path: Path, **changes: object) -> Path:
    """The example file with each switch's grpc_addr pointing at a fresh embedded switch."""
    doc = yaml.safe_load((ROOT / "examples" / example).read_text())
    for s in doc["switches"]:
        switches[s["name"]] = Sw()
        s["grpc_addr"] = f"127.0.0.1:{switches[s['name']].port}"
        s.update(changes.get(s["name"], {}))  # type: ignore[arg-type]
    path = tmp_path / example
    path.write_text(yaml.safe_dump(doc))
    return path


def ctl(topo: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    # 30 s: pushing a K=256 pipeline takes 2.5-3.6 s on a loaded 2-core machine.
    rc = main([*argv, "--topo", str(topo), "--timeout", "30"], out, err)
    return rc, out.getvalue(), err.getvalue()


def ok(topo: Path, *argv: str) -> str:
    rc, out, err = ctl(topo, *argv)
    assert rc == 0, err
    return out


def data_frame(topo: Topology, host: str, job: int, slot: int, values: np.ndarray,
               exp: int = 130, round_: int = 0,
               workers: int | None = None) -> tuple[int, bytes]:
    """(ingress port, frame) of `host`'s DATA packet to its switch's service address;
    `workers`: the job's member count, when the job is not one of the topology file's."""
    h = topo.host(host)
    svc = topo.switch(h.switch).service
    src = wire.Endpoint(h.mac.to_bytes(6, "big"), h.ipv4.to_bytes(4, "big"), h.udp_port)
    dst = wire.Endpoint(svc.mac.to_bytes(6, "big"), svc.ipv4.to_bytes(4, "big"))
    # protocol v2: what a correctly configured member says (the job's member count, its K)
    spec = next((j for j in topo.jobs if j.id == job), None)
    header = wire.Header(msg_type=MsgType.DATA, flags=Flags.NONE, job_id=job, slot=slot,
                         exp=exp, count=0, round=round_, offset=slot * K,
                         workers=workers if workers is not None else
                         len(spec.workers) if spec else 0, klog2=K.bit_length() - 1,
                         length=1 << 20)
    return h.port, wire.build_frame(src, dst, wire.encode(header, values, K))


def vec(seed: int) -> np.ndarray:
    return np.arange(K, dtype=np.int32) * seed - 1000 * seed


#: Exponent proposals of the i-th worker of a round: distinct, the max not the first or last
#: sent, so a result must carry max(exp) of every contribution, not one worker's.
PROPOSALS = (128, 133, 126, 131)


def test_single_switch_job_lifecycle_and_aggregation(netsum_program, switches, tmp_path) -> None:
    info, js = netsum_program
    topo_path = topology("single.yaml", switches, tmp_path)
    out = ok(topo_path, "setup", "--p4info", str(info), str(js))
    assert "2 job(s) installed on 1 switch(es)" in out
    jobs = json.loads(ok(topo_path, "job", "list", "--json"))
    assert [(j["job"], j["slots"], j["contributors"]) for j in jobs["jobs"]] == [
        (1, "0..511", 4), (2, "512..767", 2)]
    assert jobs["slots"] == [{"switch": "s1", "free_slots": 256, "pool": 1024}]

    # A round of job 2 (h1, h2): the second contribution comes back to both as the sum.
    topo = parse_topology(topo_path.read_text())
    dev = switches["s1"].dev
    port, f = data_frame(topo, "h1", 2, 7, vec(1))
    assert dev.process(port, f) == []
    port, f = data_frame(topo, "h2", 2, 7, vec(2), exp=131)
    outs = dev.process(port, f)
    assert sorted(p for p, _ in outs) == [1, 2]
    for p, frame in outs:
        got = wire.parse_frame(frame, K)
        h = topo.host({1: "h1", 2: "h2"}[p])
        assert got.dst.ip == h.ipv4.to_bytes(4, "big") and got.dst.port == h.udp_port
        assert got.packet.header.msg_type is MsgType.RESULT and got.packet.header.exp == 131
        assert np.array_equal(got.packet.values, vec(1) + vec(2))
    # A packet from a non-member is dropped and counted.
    port, f = data_frame(topo, "h3", 2, 7, vec(3))
    assert dev.process(port, f) == []
    stats = json.loads(ok(topo_path, "stats", "--json"))
    row = next(r for r in stats if r["job"] == 2)
    assert (row["data_in"], row["results_out"], row["drop_non_member"]) == (3, 2, 1)
    # A duplicate of the finished round gets the stored result back, to h1 alone...
    port, f = data_frame(topo, "h1", 2, 7, vec(5))
    assert [p for p, _ in dev.process(port, f)] == [1]
    # ...until the job is reset: a new epoch, so the same packet now opens a new round.
    assert "job 2 reset" in ok(topo_path, "job", "reset", "2")
    assert dev.process(port, f) == []
    port, f = data_frame(topo, "h2", 2, 7, vec(6))
    outs = dev.process(port, f)
    assert sorted(p for p, _ in outs) == [1, 2]
    assert all(np.array_equal(wire.parse_frame(fr, K).packet.values, vec(5) + vec(6))
               for _, fr in outs)
    row = next(r for r in json.loads(ok(topo_path, "stats", "--json")) if r["job"] == 2)
    assert (row["data_in"], row["results_out"]) == (2, 2)      # counters zeroed by the reset

    # Slot exhaustion: refused with what is free, nothing installed.
    before = count_entries(topo_path, info)
    rc, _, err = ctl(topo_path, "job", "create", "3", "--workers", "h3,h4", "--slots", "300")
    assert rc == 1 and err == ("netsum-ctl: error: job 3 needs 300 contiguous slots on s1 but "
                               "only 256 of 1024 are free (largest free range: 256 at "
                               "768..1023)\n")
    assert count_entries(topo_path, info) == before
    ok(topo_path, "job", "create", "3", "--workers", "h3,h4", "--slots", "256")
    epochs = json.loads(ok(topo_path, "table_dump", "job_epoch", "--json"))
    assert {r["match"]["hdr.netsum.job_id"]: r["params"]["epoch"] for r in epochs
            if not r["is_default"]} == {"1": 1, "2": 2, "3": 1}
    ok(topo_path, "job", "delete", "1")
    jobs = json.loads(ok(topo_path, "job", "list", "--json"))
    assert [j["job"] for j in jobs["jobs"]] == [2, 3]
    assert jobs["slots"][0]["free_slots"] == 512
    rc, _, err = ctl(topo_path, "job", "delete", "1")
    assert rc == 1 and "no job 1 (jobs: 2, 3)" in err
    # The epoch outlives the job: a new job 1 starts in a fresh epoch.
    ok(topo_path, "job", "create", "1", "--workers", "h1", "--slots", "8")
    epochs = json.loads(ok(topo_path, "table_dump", "job_epoch", "--json"))
    assert [r["params"]["epoch"] for r in epochs if r["match"].get("hdr.netsum.job_id") == "1"] == [2]
    ok(topo_path, "job", "delete", "1")
    rc, _, err = ctl(topo_path, "job", "create", "2", "--workers", "h1", "--slots", "1")
    assert rc == 1 and "job 2 already exists" in err
    # Job 2's counters count its rounds above; a job created again under id 2 starts from 0
    # (the switch keeps a deleted job's counter cells).
    ok(topo_path, "job", "delete", "2")
    ok(topo_path, "job", "create", "2", "--workers", "h1,h2", "--slots", "8")
    row = next(r for r in json.loads(ok(topo_path, "stats", "--json")) if r["job"] == 2)
    assert (row["data_in"], row["results_out"]) == (0, 0), row


def count_entries(topo_path: Path, info: Path) -> int:
    """Entries on the (first) switch, read by a session of its own (closed again, so the next
    netsum-ctl call can take the same election id)."""
    topo = parse_topology(topo_path.read_text())
    c = SwitchClient(Endpoint(topo.switches[0].grpc_addr, 0, (0, 5)))
    c.connect()
    try:
        return len(ops.read_entries(c, Schema(load_p4info(info)), None))
    finally:
        c.close()


def relay(outs: list[tuple[int, bytes]], links: dict[int, tuple[Sw, int]],
          hosts: dict[int, list[tuple[int, bytes]]]) -> None:
    """Deliver a switch's outputs: over a link into the next switch (recursively), or to the
    host list of that port."""
    for port, frame in outs:
        if port in links:
            nxt, in_port = links[port]
            relay(nxt.dev.process(in_port, frame), {}, hosts)
        else:
            hosts.setdefault(port, []).append(frame)


@pytest.fixture
def tree(netsum_program, switches, tmp_path) -> Iterator[tuple[Controller, Topology]]:
    info, js = netsum_program
    topo_path = topology("tree.yaml", switches, tmp_path)
    c = Controller(parse_topology(topo_path.read_text(), str(topo_path)),
                   load_program(info, js), timeout=30)   # a loaded machine: see ctl()
    c.connect()
    try:
        c.push_pipeline()
        c.install_forwarding()
        yield c, c.topo
    finally:
        c.close()


def aggregate_through_tree(c: Controller, switches: dict[str, Sw], job: int, slot: int,
                           workers: tuple[str, ...], round_: int = 0) -> dict[str, np.ndarray]:
    """One round: every worker's DATA enters its leaf; partials go up, the result comes down.
    Returns what each worker received."""
    topo = c.topo
    root, l1, l2 = switches["root"], switches["leaf1"], switches["leaf2"]
    # Leaf uplink port 3 -> root ports 1/2; root ports 1/2 -> leaf uplink port 3.
    up = {"leaf1": {3: (root, 1)}, "leaf2": {3: (root, 2)}}
    got: dict[str, list[bytes]] = {}
    for i, w in enumerate(workers):
        h = topo.host(w)
        port, f = data_frame(topo, w, job, slot, vec(i + 1), exp=PROPOSALS[i],
                             round_=round_)
        leaf = switches[h.switch]
        at_root: dict[int, list[tuple[int, bytes]]] = {}
        for out_port, frame in leaf.dev.process(port, f):
            if out_port == 3:
                in_port = up[h.switch][3][1]
                for rp, rf in root.dev.process(in_port, frame):
                    at_root.setdefault(rp, []).append((rp, rf))
            else:
                got.setdefault(f"{h.switch}:{out_port}", []).append(frame)
        for rp, items in at_root.items():
            leaf_back = {1: l1, 2: l2}[rp]
            name = {1: "leaf1", 2: "leaf2"}[rp]
            for _, rf in items:
                for lp, lf in leaf_back.dev.process(3, rf):
                    got.setdefault(f"{name}:{lp}", []).append(lf)
    by_host = {}
    for where, frames in got.items():
        sw, port = where.split(":")
        h = next(x for x in topo.hosts if x.switch == sw and x.port == int(port))
        assert len(frames) == 1, where
        parsed = wire.parse_frame(frames[0], K)
        assert parsed.dst.mac == h.mac.to_bytes(6, "big") and parsed.dst.port == h.udp_port
        assert parsed.packet.header.msg_type is MsgType.RESULT
        assert parsed.packet.header.exp == max(PROPOSALS[:len(workers)]), where
        by_host[h.name] = parsed.packet.values
    return by_host


def test_tree_configured_from_one_file_aggregates(tree, switches) -> None:
    c, topo = tree
    job = c.create_job(topo.jobs[0])
    assert {p.switch: p.role.value for p in job.plans} == {
        "leaf1": "leaf", "leaf2": "leaf", "root": "root"}
    results = aggregate_through_tree(c, switches, 1, 3, ("h1", "h2", "h3", "h4"))
    want = vec(1) + vec(2) + vec(3) + vec(4)
    assert sorted(results) == ["h1", "h2", "h3", "h4"]
    assert all(np.array_equal(v, want) for v in results.values())
    rows = {(r["job"], r["switch"]): r for r in c.job_stats()}
    assert rows[(1, "root")]["data_in"] == 2 and rows[(1, "root")]["results_out"] == 2
    assert rows[(1, "leaf1")]["partials_up"] == 1 and rows[(1, "leaf2")]["results_out"] == 2


def test_tree_rollback_across_switches(tree, switches) -> None:
    c, topo = tree
    before = {n: (dict(c.ledgers[n].entries), dict(c.ledgers[n].groups)) for n in c.clients}
    snapshot = {n: sorted(map(repr, ops.read_entries(cl, c.schema(n), None)))
                for n, cl in c.clients.items()}
    # Someone installed a member entry for job 1 on the root by hand: the root's part of the
    # job fails with ALREADY_EXISTS after both leaves were written, so the leaves roll back.
    leaf1 = topo.switch("leaf1").service
    hand = member_entry(c.schema("root"), 1, Contributor("leaf1", leaf1.mac, leaf1.ipv4,
                                                         0x6E73, 1), 1)
    ops.write_batch(c.clients["root"], c.schema("root"), ops.INSERT, [hand])
    with pytest.raises(ControllerError) as info:
        c.create_job(topo.jobs[0])
    assert "switch root" in str(info.value) and "ALREADY_EXISTS" in str(info.value)
    ops.write_batch(c.clients["root"], c.schema("root"), ops.DELETE, [hand])
    after = {n: sorted(map(repr, ops.read_entries(cl, c.schema(n), None)))
             for n, cl in c.clients.items()}
    assert after == snapshot
    assert {n: (dict(c.ledgers[n].entries), dict(c.ledgers[n].groups)) for n in c.clients} == before
    assert all(not a.ranges for a in c.allocators.values()) and not c.jobs
    # Nothing was left behind that would stop the job from being created now.
    c.create_job(topo.jobs[0])


def test_tree_slot_exhaustion_on_one_switch(netsum_program, switches, tmp_path) -> None:
    info, js = netsum_program
    topo_path = topology("tree.yaml", switches, tmp_path, root={"slots": 300})
    rc, _, err = ctl(topo_path, "setup", "--p4info", str(info), str(js))
    # Job 1 (256 slots) fits everywhere; job 2 (128) does not fit on the root: the set-up is
    # refused before any switch is touched (controller/checks.py).
    assert rc == 1 and err == (f"netsum-ctl: error: {topo_path}: jobs[1] (job 2): job 2 needs "
                               "128 contiguous slots on root but only 44 of 300 are free "
                               "(largest free range: 44 at 256..299)\n")
    rc, _, err = ctl(topo_path, "job", "list")
    assert rc == 1 and "has no forwarding pipeline" in err
    # The same refusal from the switches' own allocation, job 1 installed: all or nothing
    # across the three switches.
    doc = yaml.safe_load(topo_path.read_text())
    doc["jobs"] = doc["jobs"][:1]
    topo_path.write_text(yaml.safe_dump(doc))
    ok(topo_path, "setup", "--p4info", str(info), str(js))
    rc, _, err = ctl(topo_path, "job", "create", "2", "--workers", "h1,h3", "--slots", "128")
    assert rc == 1 and err == ("netsum-ctl: error: job 2 needs 128 contiguous slots on root but "
                               "only 44 of 300 are free (largest free range: 44 at 256..299)\n")
    jobs = json.loads(ok(topo_path, "job", "list", "--json"))
    assert sorted({j["job"] for j in jobs["jobs"]}) == [1]       # nothing of job 2 anywhere
    assert {s["switch"]: s["free_slots"] for s in jobs["slots"]} == {
        "root": 44, "leaf1": 768, "leaf2": 768}


def test_restart_restores_everything(tree, switches) -> None:
    c, topo = tree
    c.create_job(topo.jobs[0])
    c.create_job(topo.jobs[1])
    c.set_drop("leaf2", 1, 0.25, "both")
    owned = {n: sorted(map(repr, ops.read_entries(cl, c.schema(n), None)))
             for n, cl in c.clients.items()}
    groups = {n: ops.read_groups(cl) for n, cl in c.clients.items()}
    assert c.check() == []                          # nothing lost yet: nothing to do

    switches["leaf2"].restart()
    switches["root"].restart()
    restored: list[tuple[str, str]] = []
    assert sorted(c.check(lambda n, why: restored.append((n, why)))) == ["leaf2", "root"]
    assert {n for n, _ in restored} == {"leaf2", "root"}
    for n, cl in c.clients.items():
        assert sorted(map(repr, ops.read_entries(cl, c.schema(n), None))) == owned[n], n
        assert ops.read_groups(cl) == groups[n], n
    drop = [e for e in ops.read_entries(c.clients["leaf2"], c.schema("leaf2"), P.DROP_SIM_IN)]
    assert [e.params for e in drop] == [(P.drop_threshold(0.25),)]
    # And the data plane works again: a round of job 1 through the restarted root and leaf.
    c.set_drop("leaf2", 1, 0.0, "both")
    results = aggregate_through_tree(c, switches, 1, 0, ("h1", "h2", "h3", "h4"))
    want = vec(1) + vec(2) + vec(3) + vec(4)
    assert sorted(results) == ["h1", "h2", "h3", "h4"]
    assert all(np.array_equal(v, want) for v in results.values())
    assert c.check() == []


def test_topology_verbs_and_drop_simulator(netsum_program, switches, tmp_path) -> None:
    info, js = netsum_program
    topo_path = topology("single.yaml", switches, tmp_path)
    out = ok(topo_path, "pipeline", "push", "--p4info", str(info), str(js))
    assert "pipeline pushed to s1" in out
    ok(topo_path, "setup", "--p4info", str(info), str(js))
    ok(topo_path, "job", "delete", "1")
    ok(topo_path, "job", "create", "1")                # workers and slots from the file
    jobs = json.loads(ok(topo_path, "job", "list", "--json"))["jobs"]
    assert [(j["job"], j["contributors"], j["slots"]) for j in jobs] == [
        (1, 4, "0..511"), (2, 2, "512..767")]

    ok(topo_path, "dropsim", "set", "3", "0.5", "--direction", "both")
    ok(topo_path, "dropsim", "set", "3", "0.25")         # in only: modifies the existing entry
    addr = parse_topology(topo_path.read_text()).switches[0].grpc_addr
    out, err = io.StringIO(), io.StringIO()
    # Without --topo the same verb talks to one switch by address.
    assert main(["dropsim", "set", "4", "1", "--grpc-addr", addr], out, err) == 0, err.getvalue()
    ins = json.loads(ok(topo_path, "table_dump", "drop_sim_in", "--json"))
    outs = json.loads(ok(topo_path, "table_dump", "drop_sim_out", "--json"))
    assert {r["match"]["standard_metadata.ingress_port"]: r["params"] for r in ins
            if not r["is_default"]} == {"3": {"threshold": 16384}, "4": {"threshold": 65535}}
    assert [r["params"] for r in outs if not r["is_default"]] == [{"threshold": 32768}]
    # Everything at 100 % on port 3: h3's packets never arrive; the counter says so.
    ok(topo_path, "dropsim", "set", "3", "1")
    topo = parse_topology(topo_path.read_text())
    port, f = data_frame(topo, "h3", 1, 0, vec(1))
    assert switches["s1"].dev.process(port, f) == []
    cells = json.loads(ok(topo_path, "counter_read", "sim_drops_in", "3", "--json"))
    assert cells[0]["packets"] == 1
    ports = json.loads(ok(topo_path, "stats", "--ports", "--json"))
    assert [(r["port"], r["sim_drops_in"], r["sim_drops_out"]) for r in ports] == [
        (1, 0, 0), (2, 0, 0), (3, 1, 0), (4, 0, 0)]

    rc, out_text, err_text = ctl(topo_path, "stats", "--watch", "0.01", "--count", "2")
    assert rc == 0 and out_text.count("per-job counters at") == 2
    assert "drop_non_member" in out_text
    assert "data_in/s" in out_text and "rates per second" in out_text

    for argv, message in [
        (("dropsim", "set", "9", "0.1"), "switch s1 has no port 9 (ports: 1, 2, 3, 4)"),
        (("dropsim", "set", "1", "1.5"), "drop probability 1.5 is not within 0..1"),
        (("job", "create", "7"), "job 7 is not in"),
        (("job", "create", "7", "--workers", "h1,h9", "--slots", "4"), "no host named 'h9'"),
        (("job", "create", "300", "--workers", "h1", "--slots", "4"),
         "job id 300 is out of range 1..255"),
        (("job", "delete", "99"), "no job 99 (jobs: 1, 2)"),
    ]:
        rc, _, err_text = ctl(topo_path, *argv)
        assert rc == 1 and message in err_text and err_text.count("\n") == 1, err_text
    # Refused requests left nothing behind: same jobs, same free slots.
    after = json.loads(ok(topo_path, "job", "list", "--json"))
    assert [j["job"] for j in after["jobs"]] == [1, 2] and after["slots"][0]["free_slots"] == 256


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["hosts"][1].update(mac="nope"), "hosts[1].mac: 'nope' is not a MAC address"),
    (lambda d: d["jobs"][0]["workers"].append("h7"), "jobs[0].workers[4]: no host named 'h7'"),
    (lambda d: d.pop("switches"), "<top>: missing required key 'switches'"),
])
def test_bad_topology_file_via_cli(tmp_path, mutate, message) -> None:  # type: ignore[no-untyped-def]
    doc = yaml.safe_load((ROOT / "examples" / "single.yaml").read_text())
    mutate(doc)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    for argv in (("job", "list"), ("setup",), ("table_dump", "dmac")):
        rc, out, err = ctl(path, *argv)
        assert rc == 1 and err.startswith(f"netsum-ctl: error: {path}: {message}"), err
        assert err.count("\n") == 1
    rc, _, err = ctl(tmp_path / "missing.yaml", "job", "list")
    assert rc == 1 and "cannot read topology file" in err


def test_a_change_on_a_restarted_switch_restores_it_first(tree, switches) -> None:
    """No check() call in between: the next operation notices the restart, restores the switch
    from the ledger and then applies the change."""
    c, topo = tree
    c.create_job(topo.jobs[0])
    switches["leaf1"].restart()
    c.create_job(topo.jobs[1])                  # touches leaf1, leaf2 and root
    names = {e.table for e in ops.read_entries(c.clients["leaf1"], c.schema("leaf1"), None)}
    assert {P.DMAC, P.ARP, P.JOB, P.MEMBER, P.REPLICA} <= names
    jobs = [e.match[0][1].value for e in ops.read_entries(c.clients["leaf1"], c.schema("leaf1"),
                                                          P.JOB)]
    assert sorted(jobs) == [1, 2]
    results = aggregate_through_tree(c, switches, 2, 5, ("h1", "h3"))
    assert sorted(results) == ["h1", "h3"]
    assert all(np.array_equal(v, vec(1) + vec(2)) for v in results.values())


@pytest.mark.slow
def test_stats_watch_rides_through_a_restart(netsum_program, switches, tmp_path) -> None:
    import threading
    info, js = netsum_program
    topo_path = topology("single.yaml", switches, tmp_path)
    ok(topo_path, "setup", "--p4info", str(info), str(js))
    out, err = io.StringIO(), io.StringIO()
    rcs: list[int] = []
    argv = ["stats", "--watch", "0.03", "--count", "200", "--topo", str(topo_path),
            "--timeout", "3"]
    watcher = threading.Thread(target=lambda: rcs.append(main(argv, out, err)))
    watcher.start()

    def wait_for(*fragments: str, after: int = 0) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = out.getvalue()
            found = [i for i in (text.find(f, after) for f in fragments) if i >= 0]
            if found:
                return min(found)
            time.sleep(0.02)
        raise AssertionError(f"none of {fragments} in {out.getvalue()!r}")

    wait_for("per-job counters")
    switches["s1"].restart()                  # empty again; the watcher keeps going
    outage = wait_for("unreachable", "no forwarding pipeline")
    # Another controller (higher election id: the watcher may have reconnected) sets it up.
    ok(topo_path, "setup", "--p4info", str(info), str(js), "--election-id", "0,2")
    wait_for("per-job counters", after=outage)
    watcher.join(timeout=60)
    assert rcs == [0] and err.getvalue() == "", err.getvalue()


def test_tree_with_a_worker_on_the_root(netsum_program, switches, tmp_path) -> None:
    info, js = netsum_program
    doc = yaml.safe_load((ROOT / "examples" / "tree.yaml").read_text())
    doc["switches"][0]["ports"] = [1, 2, 3]
    doc["hosts"].append({"name": "h5", "mac": "02:00:00:00:00:05", "ipv4": "10.0.0.5",
                         "switch": "root", "port": 3})
    doc["jobs"] = [{"id": 9, "workers": ["h1", "h5", "h3"], "slots": 32}]
    for s in doc["switches"]:
        switches[s["name"]] = Sw()
        s["grpc_addr"] = f"127.0.0.1:{switches[s['name']].port}"
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(doc))
    ok(path, "setup", "--p4info", str(info), str(js))
    topo = parse_topology(path.read_text())
    root, l1, l2 = (switches[n].dev for n in ("root", "leaf1", "leaf2"))

    def up(leaf, host: str, value: np.ndarray, exp: int) -> list[tuple[int, bytes]]:
        port, f = data_frame(topo, host, 9, 4, value, exp=exp)
        outs = leaf.process(port, f)
        assert [p for p, _ in outs] == [3]           # a leaf of one worker sends straight up
        return outs

    (_, partial), = up(l1, "h1", vec(1), PROPOSALS[0])
    assert root.process(1, partial) == []
    port, f = data_frame(topo, "h5", 9, 4, vec(5), exp=PROPOSALS[1])
    assert root.process(port, f) == []
    (_, partial), = up(l2, "h3", vec(3), PROPOSALS[2])
    results = dict(root.process(2, partial))
    assert sorted(results) == [1, 2, 3]
    got = {"h5": results[3]}
    got["h1"] = dict(l1.process(3, results[1]))[1]
    got["h3"] = dict(l2.process(3, results[2]))[1]
    want = vec(1) + vec(5) + vec(3)
    for host, frame in got.items():
        parsed = wire.parse_frame(frame, K)
        assert parsed.dst.ip == topo.host(host).ipv4.to_bytes(4, "big"), host
        assert np.array_equal(parsed.packet.values, want), host
        assert parsed.packet.header.exp == max(PROPOSALS[:3]), host


def test_stats_watch_rates_follow_live_traffic(netsum_program, switches, tmp_path) -> None:
    """`stats --watch --json` while DATA packets arrive: the counter grows by exactly the
    packets sent, and each sample's data_in/s is that sample's increase over a time between
    the watch interval and a generous bound (0 once the traffic stopped)."""
    import threading
    info, js = netsum_program
    topo_path = topology("single.yaml", switches, tmp_path)
    ok(topo_path, "setup", "--p4info", str(info), str(js))
    topo = parse_topology(topo_path.read_text())
    interval, samples = 0.3, 16     # ~5 s: the 100 packets are fed well before the end
    out, err = io.StringIO(), io.StringIO()
    rcs: list[int] = []
    argv = ["stats", "--watch", str(interval), "--count", str(samples), "--json", "--topo",
            str(topo_path)]
    watcher = threading.Thread(target=lambda: rcs.append(main(argv, out, err)))
    watcher.start()
    deadline = time.monotonic() + 30
    while "data_in" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    sent = 0
    for burst in range(5):              # one new slot per packet: each counts once in data_in
        for slot in range(burst * 20, burst * 20 + 20):
            port, f = data_frame(topo, "h1", 1, slot, vec(1))
            switches["s1"].dev.process(port, f)
            sent += 1
        time.sleep(0.12)
    watcher.join(timeout=60)
    assert rcs == [0], err.getvalue()
    text, docs, pos = out.getvalue(), [], 0
    decoder = json.JSONDecoder()
    while pos < len(text.rstrip()):
        doc, pos = decoder.raw_decode(text, pos)
        docs.append(doc)
        while pos < len(text) and text[pos].isspace():
            pos += 1
    rows = [next(r for r in d if r["job"] == 1) for d in docs]
    assert len(rows) == samples and rows[0]["data_in/s"] == ""
    assert rows[-1]["data_in"] == sent and rows[-1]["data_in/s"] == 0
    grew = 0
    for before, now in zip(rows, rows[1:]):
        delta = now["data_in"] - before["data_in"]
        assert delta >= 0
        if delta == 0:
            assert now["data_in/s"] == 0
        else:
            grew += 1
            assert delta / 20.0 <= now["data_in/s"] <= delta / interval, (delta, now)
    assert grew >= 2                     # the rates followed the bursts over several samples


def test_job_fail_names_the_missing_rank_and_reclaims(netsum_program, switches,
                                                      tmp_path) -> None:
    """`job fail`: h1 of job 2 (h1, h2) contributed to slot 7, h2 never did; the controller
    reads the slot registers, names rank 1 (h2), removes the job and frees its slots; the
    record stays in `job list`; late DATA of the job changes nothing; the job created again
    gets the same slots."""
    info, js = netsum_program
    topo_path = topology("single.yaml", switches, tmp_path)
    ok(topo_path, "setup", "--p4info", str(info), str(js))
    topo = parse_topology(topo_path.read_text())
    dev = switches["s1"].dev
    port, f = data_frame(topo, "h1", 2, 7, vec(1))
    assert dev.process(port, f) == []
    status = dev.process(port, f)                     # h1 asks again: a STATUS, bitmap 0b01
    assert [p for p, _ in status] == [port]
    got = wire.parse_frame(status[0][1], K).packet
    assert got.header.msg_type is MsgType.STATUS and int(got.values[0]) == 0b01
    out = json.loads(ok(topo_path, "job", "fail", "2", "--rank", "1", "--json"))
    assert out["why"] == "reported failed (rank 1)" and out["slots"] == {"s1": "512..767"}
    assert "rank 1 (h2) in 1 of 1 incomplete sets" in out["missing"], out
    jobs = json.loads(ok(topo_path, "job", "list", "--json"))
    assert [j["job"] for j in jobs["jobs"]] == [1]
    assert jobs["slots"][0]["free_slots"] == 512
    assert [(r["job"], r["epoch"]) for r in jobs["reclaimed"]] == [(2, 2)]
    assert "rank 1 (h2)" in jobs["reclaimed"][0]["record"]
    assert dev.process(port, f) == []                 # the job's entries are gone
    rc, _, err = ctl(topo_path, "job", "fail", "2")
    assert rc == 1 and "no job 2 to reclaim (jobs: 1)" in err
    created = json.loads(ok(topo_path, "job", "create", "2", "--json"))
    assert [r["slots"] for r in created] == ["512..767"]
    assert json.loads(ok(topo_path, "job", "list", "--json"))["reclaimed"] == []


def test_a_pipeline_push_is_not_held_to_a_table_writes_deadline(netsum_program, switches,
                                                               tmp_path) -> None:
    """Loading a program is the switch's heaviest call (netsum-switch builds its pipeline for
    it): a controller whose per-call deadline suits table writes must still push it.  Loading
    netsum.p4 at K=256 (a 1.6 MB JSON) takes the embedded switch seconds, far over the 50 ms
    deadline given here, so with that deadline on the push itself this fails with
    SwitchUnreachable."""
    info, js = netsum_program
    topo_path = topology("single.yaml", switches, tmp_path)
    c = Controller(parse_topology(topo_path.read_text(), str(topo_path)),
                   load_program(info, js), timeout=30)
    c.connect()
    try:
        for client in c.clients.values():
            client.timeout = 0.05          # what every other call of this controller gets
        c.push_pipeline()
    finally:
        c.close()
    sw = c.topo.switches[0]
    with SwitchClient(Endpoint(sw.grpc_addr, sw.device_id, (9, 0)), timeout=30) as check:
        check.connect()
        assert check.get_config().p4info == load_program(info, js).p4info
