"""Worker cores against the real aggregation program: p4/netsum.p4 compiled by netsum-p4c and
run by the embedded switch's Device, in process and on the virtual clock of tests/oracle.py's
network loop (its lossy links; the oracle switch model is NOT used here).  Loss comes from
the links (which also reorder and duplicate, each worker's packets too) and from netsum.p4's
own drop simulator; sums must be exact within the bound the inputs give."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from checks import assert_sum_of_inputs
from oracle import LossyLink, Network

from netsum.wire import HEADER_BYTES, K_DEFAULT, RANK_SWITCH, UDP_PORT
from netsum.workers import wire
from netsum.workers.core import JobConfig, Timing, WorkerCore

import p4helpers

FAST = Timing(rto_initial=0.005, rto_min=0.002, rto_max=0.1, progress_deadline=2.0)
SERVICE = wire.Endpoint.parse(p4helpers.SERVICE_MAC, p4helpers.SERVICE_IP, UDP_PORT)


@dataclass
class P4Fabric:
    """Adapts netsum.p4 on a Device to the network loop: worker i sits on switch port i+1;
    payloads are wrapped in that worker's frames, outputs parsed back with wire.parse_frame."""
    switch: object
    hosts: list
    prefixes: list = field(default_factory=list)
    outputs: int = 0

    def __post_init__(self) -> None:
        for h in self.hosts:
            local = wire.Endpoint.parse(h.mac, h.ip, h.udp_port)
            self.prefixes.append(wire.FramePrefix.build(local, SERVICE, HEADER_BYTES + 4 * K_DEFAULT))

    def process(self, src: int, payload: bytes) -> list[tuple[int, bytes]]:
        out = []
        frame_in = self.prefixes[src].frame(payload)
        for port, frame in self.switch.send(self.hosts[src].port, frame_in):
            parsed = wire.parse_frame(frame, K_DEFAULT)  # a bad frame from the P4 program fails
            worker = port - 1
            assert parsed.dst.ip == wire.Endpoint.parse(self.hosts[worker].mac,
                                                        self.hosts[worker].ip).ip
            assert parsed.dst.port == self.hosts[worker].udp_port
            self.outputs += 1
            out.append((worker, parsed.payload))
        return out


@pytest.fixture(scope="module")
def config() -> bytes:
    from netsum import build
    try:
        return p4helpers.netsum_config(K_DEFAULT)
    except build.BuildError as exc:  # reported by the build's own tests; not a worker failure
        pytest.skip(f"netsum.p4 does not build in this checkout: {exc}")


@pytest.mark.parametrize("n, slots, length, link_loss, p4_drop", [
    (2, 8, 600, 0.0, 0),
    (4, 16, 2000, 0.10, 0),
    (3, 8, 900, 0.05, 3277),     # plus ~5% dropped by netsum.p4's drop simulator, each way
])
def test_exact_sums_through_netsum_p4(config: bytes, n: int, slots: int, length: int,
                                      link_loss: float, p4_drop: int) -> None:
    sw = p4helpers.NetsumSwitch(config)
    hosts = [p4helpers.worker_host(i) for i in range(n)]
    sw.add_job(4, hosts, slot_base=100, num_slots=slots)
    if p4_drop:
        for h in hosts:
            sw.set_drop_rate(h.port, p4_drop)
            sw.set_drop_rate(h.port, p4_drop, egress=True)
    rng = np.random.default_rng(n)
    fabric = P4Fabric(sw, hosts)
    net = Network(fabric, LossyLink(rng, loss=link_loss, dup=link_loss / 2, reorder=0.1),
                  LossyLink(rng, loss=link_loss, dup=link_loss / 2, reorder=0.1))
    job = JobConfig(job_id=4, num_workers=n, num_slots=slots)
    xs = [(rng.standard_normal(length) * 10.0 ** rng.uniform(-5, 5)).astype(np.float32)
          for _ in range(n)]
    rounds: list[tuple[int, ...] | None] = [None] * n
    # The second call is a new registration of the job (new worker processes: rounds from 0,
    # and the controller's new epoch); the third continues the second's rounds.
    for call in range(3):
        if call == 1:
            rounds = [None] * n
            sw.set_epoch(4, 1)
            net.queue.clear()       # the first registration's packets are gone
        ins = [x * (call + 1) for x in xs]
        cores = {i: WorkerCore(ins[i], job, FAST, rounds[i]) for i in range(n)}
        net.run(cores)
        results = [cores[i].result() for i in range(n)]
        assert_sum_of_inputs(results, ins)
        rounds = [r.next_rounds for r in results]
    if link_loss or p4_drop:
        assert sum(r.stats.retransmissions for r in results) > 0
        assert sw.counter("retransmissions", 4) > 0


UP_PORT = 10
ROOT_SERVICE = ("02:00:00:00:ff:fe", "10.255.0.254")


@dataclass
class TreeFabric:
    """Two-level tree of netsum.p4 Devices: leaf j serves workers j*per_leaf.., forwards its
    partial sum up (leaf port UP_PORT -> root port j+1), and the root's result comes down.
    Internal hops are instantaneous; netsum.p4's drop simulator loses packets on them."""
    root: object
    leaves: list
    hosts: list          # per leaf: worker Hosts (p4helpers.Host), port i+1 on the leaf
    services: list       # per leaf: its service Host
    prefixes: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for j, hosts in enumerate(self.hosts):
            svc = wire.Endpoint.parse(self.services[j].mac, self.services[j].ip)
            for i, h in enumerate(hosts):
                local = wire.Endpoint.parse(h.mac, h.ip, h.udp_port)
                self.prefixes[(j, i)] = wire.FramePrefix.build(local, svc, HEADER_BYTES + 4 * K_DEFAULT)

    def process(self, src: int, payload: bytes) -> list[tuple[int, bytes]]:
        per = len(self.hosts[0])
        j, i = divmod(src, per)
        return self._leaf(j, self.hosts[j][i].port, self.prefixes[(j, i)].frame(payload))

    def _leaf(self, j: int, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        out = []
        per = len(self.hosts[0])
        for p, f in self.leaves[j].send(port, frame):
            if p == UP_PORT:
                for rp, rf in self.root.send(j + 1, f):
                    out += self._leaf(rp - 1, UP_PORT, rf)
            else:
                parsed = wire.parse_frame(f, K_DEFAULT)
                assert parsed.dst.port == self.hosts[j][p - 1].udp_port
                out.append((j * per + p - 1, parsed.payload))
        return out


def _tree(config: bytes, leaves_n: int, per: int, drop: int) -> TreeFabric:
    """A root over `leaves_n` leaves of `per` workers each (ranks leaf by leaf), with
    netsum.p4's drop simulator losing `drop`/65536 on every internal hop, each way."""
    n = leaves_n * per
    root = p4helpers.NetsumSwitch(config)
    services = [p4helpers.Host(j + 1, f"02:00:00:00:{j + 1:02x}:fe", f"10.{j + 1}.0.254",
                               UDP_PORT) for j in range(leaves_n)]
    up = p4helpers.Host(0, *ROOT_SERVICE, UDP_PORT)
    root.add_job(9, services, num_slots=8, job_workers=n, ranks=[RANK_SWITCH] * leaves_n)
    leaves, hosts = [], []
    for j in range(leaves_n):
        sw = p4helpers.NetsumSwitch(config)
        hs = [p4helpers.Host(i + 1, f"02:00:00:{j + 1:02x}:00:{i + 1:02x}",
                             f"10.{j + 1}.0.{i + 1}", 41000 + i) for i in range(per)]
        sw.add_job_leaf(9, slot_base=16, num_slots=8, num_workers=per, mgid=50,
                        up_port=UP_PORT, leaf=services[j], up=up, job_workers=n)
        ranks = [j * per + i for i in range(per)]
        for i, h in enumerate(hs):
            sw.add_member(9, h, i, ranks[i])
        sw.add_result_group(50, hs, rid_base=1, ranks=ranks)
        sw.allow_results(9, [h.port for h in hs])
        if drop:
            sw.set_drop_rate(UP_PORT, drop, egress=True)
            sw.set_drop_rate(UP_PORT, drop)
            root.set_drop_rate(j + 1, drop, egress=True)
        leaves.append(sw)
        hosts.append(hs)
    return TreeFabric(root, leaves, hosts, services)


@pytest.mark.parametrize("drop", [0, 6554])   # 0% or ~10% on every internal hop, each way
def test_exact_sums_through_a_two_level_tree(config: bytes, drop: int) -> None:
    leaves_n, per = 2, 2
    n = leaves_n * per
    fabric = _tree(config, leaves_n, per, drop)
    rng = np.random.default_rng(drop)
    net = Network(fabric, LossyLink(rng, dup=0.05, reorder=0.1),
                  LossyLink(rng, dup=0.05, reorder=0.1))
    job = JobConfig(job_id=9, num_workers=n, num_slots=8)
    xs = [(rng.standard_normal(700) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
          for _ in range(n)]
    cores = {w: WorkerCore(xs[w], job, FAST) for w in range(n)}
    net.run(cores)
    results = [cores[w].result() for w in range(n)]
    assert_sum_of_inputs(results, xs)
    if drop:
        assert sum(r.stats.retransmissions for r in results) > 0
        assert sum(leaf.counter("retransmissions", 9) for leaf in fabric.leaves) > 0


def test_reduce_scatter_through_a_two_level_tree(config: bytes) -> None:
    """The root sends every leaf the values; each leaf gives them to the owner among its
    workers and ACKs to the others: every rank gets its own shard, exact."""
    from netsum.tensors import check_result, reference
    from netsum.workers.blocks import even_shards

    n, length = 4, 1500
    fabric = _tree(config, 2, 2, 3277)
    rng = np.random.default_rng(14)
    net = Network(fabric, LossyLink(rng, reorder=0.1), LossyLink(rng, reorder=0.1))
    job = JobConfig(job_id=9, num_workers=n, num_slots=8)
    xs = [rng.standard_normal(length).astype(np.float32) for _ in range(n)]
    sh = even_shards(length, n)
    cores = {r: WorkerCore(xs[r], job, FAST, rank=r, shards=sh) for r in range(n)}
    net.run(cores)
    at = 0
    for r in range(n):
        got = cores[r].result().tensor
        verdict = check_result(got, reference([x[at:at + sh[r]] for x in xs], K_DEFAULT))
        assert verdict.ok, (r, verdict.problem)
        at += sh[r]


# ---- protocol v2 end to end through netsum.p4: refusals, reduce-scatter, NONFINITE --------

def _v2_switch(config: bytes, n: int, slots: int = 8) -> tuple[object, list]:
    sw = p4helpers.NetsumSwitch(config)
    hosts = [p4helpers.worker_host(i) for i in range(n)]
    sw.add_job(4, hosts, slot_base=0, num_slots=slots)
    return sw, hosts


def test_a_misconfigured_member_through_netsum_p4(config: bytes) -> None:
    """Rank 0 says 8 workers in a 4-member job: netsum.p4 refuses it (RejectedError naming both
    counts, at once), the others time out naming rank 0's refusal from the STATUS replies; the
    switch counted the refusals and summed nothing wrong."""
    from netsum.wire import Reason
    from netsum.workers.errors import RejectedError, WorkerTimeoutError

    sw, hosts = _v2_switch(config, 4)
    rng = np.random.default_rng(11)
    net = Network(P4Fabric(sw, hosts), LossyLink(rng), LossyLink(rng))
    xs = [rng.standard_normal(900).astype(np.float32) for _ in range(4)]
    jobs = [JobConfig(4, 8 if r == 0 else 4, 8) for r in range(4)]
    cores = {r: WorkerCore(xs[r], jobs[r], FAST, rank=r) for r in range(4)}
    net.run(cores, keep_going=True)
    assert isinstance(net.failures[0], RejectedError)
    assert net.failures[0].reason == Reason.WORKERS
    assert "rank 0 says 8 workers, job 4 has 4" in str(net.failures[0])
    for r in (1, 2, 3):
        assert isinstance(net.failures[r], WorkerTimeoutError)
        assert "the switch refused rank 0's DATA (WORKERS" in str(net.failures[r])
    assert sw.counter("reject_workers", 4) >= 1


@pytest.mark.parametrize("shards", [None, [700, 0, 300]])
def test_reduce_scatter_through_netsum_p4(config: bytes, shards: list[int] | None) -> None:
    """Each rank gets its own shard, exact (expectation: the inputs' float64 sum of that
    shard); the frames reaching a rank carry values for its own blocks only (and the zero
    bootstraps), ACKs for the rest."""
    from netsum.tensors import check_result, reference
    from netsum.workers.blocks import even_shards, plan_blocks

    n, length = 3, 1000
    sh = even_shards(length, n) if shards is None else shards
    sw, hosts = _v2_switch(config, n)
    rng = np.random.default_rng(12)
    fabric = P4Fabric(sw, hosts)
    sizes: dict[int, list[int]] = {r: [] for r in range(n)}

    def count(node: int, payload: bytes) -> bytes:
        sizes[node].append(len(payload))
        return payload
    net = Network(fabric, LossyLink(rng, loss=0.05, reorder=0.1),
                  LossyLink(rng, loss=0.05, reorder=0.1))
    net.tamper = count
    job = JobConfig(4, n, 8)
    xs = [(rng.standard_normal(length) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
          for _ in range(n)]
    cores = {r: WorkerCore(xs[r], job, FAST, rank=r, shards=sh) for r in range(n)}
    net.run(cores)
    plan = plan_blocks(length, K_DEFAULT, sh)
    at = 0
    for r in range(n):
        res = cores[r].result()
        assert res.tensor.shape == (sh[r],)
        if sh[r]:
            verdict = check_result(res.tensor, reference([x[at:at + sh[r]] for x in xs],
                                                         K_DEFAULT))
            assert verdict.ok, (r, verdict.problem)
        at += sh[r]
        own = int((plan.owners == r).sum())
        full = sum(1 for s in sizes[r] if s > HEADER_BYTES)
        boot = min(8, plan.num_blocks)
        assert own + boot <= full <= own + boot + res.stats.retransmissions
    assert sw.counter("reject_dest", 4) == 0


def test_nonfinite_through_netsum_p4(config: bytes) -> None:
    from netsum.wire import Flags

    n = 3
    sw, hosts = _v2_switch(config, n)
    rng = np.random.default_rng(13)
    net = Network(P4Fabric(sw, hosts), LossyLink(rng, reorder=0.1), LossyLink(rng, reorder=0.1))
    xs = [rng.standard_normal(K_DEFAULT * 5).astype(np.float32) for _ in range(n)]
    flags = [np.zeros(5, bool) for _ in range(n)]
    flags[1][3] = True
    job = JobConfig(4, n, 8)
    cores = {r: WorkerCore(xs[r], job, FAST, rank=r, nonfinite=flags[r]) for r in range(n)}
    net.run(cores)
    results = [cores[r].result() for r in range(n)]
    for res in results:
        assert res.flags.tolist() == [0, 0, 0, int(Flags.NONFINITE), 0]
    assert_sum_of_inputs(results, xs)
