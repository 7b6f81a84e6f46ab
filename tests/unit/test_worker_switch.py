"""Worker cores against the real aggregation program: p4/netsum.p4 compiled by netsum-p4c and
run by the embedded switch's Device, in process and on the virtual clock of tests/oracle.py's
network loop (its lossy links; the oracle switch model is NOT used here).  Loss comes from
the links and from netsum.p4's own drop simulator; sums must be exact within the bound."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from oracle import LossyLink, Network

from workers import wire
from workers.core import JobConfig, Timing, WorkerCore
from workers.protocol import K_DEFAULT, UDP_PORT

p4helpers = pytest.importorskip("p4helpers")

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
            self.prefixes.append(wire.FramePrefix.build(local, SERVICE, 12 + 4 * K_DEFAULT))

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
    try:
        return p4helpers.netsum_config(K_DEFAULT)
    except Exception as exc:  # the compiler or switch is not usable in this checkout
        pytest.skip(f"netsum.p4 cannot be built here: {exc}")


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
    net = Network(fabric, LossyLink(rng, loss=link_loss, dup=link_loss / 2, reorder=0.1,
                                    fifo=True),
                  LossyLink(rng, loss=link_loss, dup=link_loss / 2, reorder=0.1))
    job = JobConfig(job_id=4, num_workers=n, num_slots=slots)
    xs = [(rng.standard_normal(length) * 10.0 ** rng.uniform(-5, 5)).astype(np.float32)
          for _ in range(n)]
    sets = [None] * n
    for call in range(2):  # twice: the second call starts from the sets the first left
        cores = {i: WorkerCore(xs[i] * (call + 1), job, FAST, sets[i]) for i in range(n)}
        net.run(cores)
        results = [cores[i].result() for i in range(n)]
        true = np.sum([x.astype(np.float64) * (call + 1) for x in xs], axis=0)
        for r in results:
            assert np.array_equal(r.tensor, results[0].tensor)
            err = np.abs(r.tensor.astype(np.float64) - true)
            assert (err <= r.bound + np.abs(true) * 2.0**-24 + 2.0**-150).all()
        sets = [r.next_sets for r in results]
    if link_loss or p4_drop:
        assert sum(r.stats.retransmissions for r in results) > 0
        assert sw.counter("retransmissions", 4) > 0
