"""Speculative exponents (issue 23, docs/quantization.md) end to end in the compiled worker
core: a `netsum-switch` daemon running p4/netsum.p4 (UDP ports, set up by `netsum-ctl`), two
workers in this process (threads), each a `NativeCore` over a `FrameTransport` driven by the
one driver, three calls of one job registration (the rounds continue):

1. no prediction (the agreed scheme: bootstrap, then data);
2. predictions that all hit (the maxima computed from the inputs), slack 0;
3. predictions that miss (one below the max, one above it beyond the slack, EXP_ZERO) and
   that hit above the max within slack 2 (those blocks quantized with the prediction).

Each result must be bit for bit the integer reference of tests/exactsums.py, with the
exponents given by the design's rule computed from the inputs and the predictions (never
from the result): a hit iff M == EXP_ZERO or M <= P <= M + slack (quantized with P, or
EXP_ZERO), else a miss (sent again with M, counted in Stats.misses)."""
from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

from exactsums import expected_sums, reference_results
from helpers import BIN, SwitchDaemon, assert_switch_clean, built_netsum, free_udp_ports
from netsum.procs import ProcessGroup
from netsum.wire import EXP_ZERO
from netsum.workers import Endpoint, FrameTransport, JobConfig, Timing
from netsum.workers.core import AllreduceResult
from netsum.workers.driver import Driver
from netsum.workers.native import NativeCore, native_status

K = 32
SERVICE_MAC, SERVICE_IP = "02:00:00:00:00:fe", "10.0.0.254"
LENGTH = 40 * K + 7          # 41 blocks, the last one short, on an 8-slot window
SLOTS = 8

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not native_status()[0],
                                 reason=f"no compiled worker core: {native_status()[1]}")]


def ctl(topo: Path, p4info: Path, *args: str) -> None:
    proc = subprocess.run([str(BIN / "netsum-ctl"), "--topo", str(topo), "--p4info",
                           str(p4info), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def maxima(xs: list[np.ndarray]) -> np.ndarray:
    """Per block, the max over ranks of the least biased e with 2^e >= max|x|, from the
    inputs (padded with zeros to whole blocks)."""
    pad = np.zeros(-LENGTH % K, np.float32)
    return expected_sums([np.concatenate([x, pad]) for x in xs], K)[0]


def rule(pred: np.ndarray, m: np.ndarray, slack: int) -> tuple[np.ndarray, np.ndarray]:
    """(hit per block, the exponent its values end quantized with)."""
    p, mm = pred.astype(int), m.astype(int)
    hit = (mm == EXP_ZERO) | ((mm <= p) & (p <= mm + slack))
    return hit, np.where(hit, np.where(mm == EXP_ZERO, EXP_ZERO, p), mm).astype(np.uint8)


def test_speculative_exponents_through_netsum_switch(tmp_path: Path) -> None:
    p4info, json_path = built_netsum(K)
    procs = ProcessGroup(tmp_path / "logs")
    binds = free_udp_ports(2)
    daemon = SwitchDaemon(procs, [f"{n}@udp:127.0.0.1:0=127.0.0.1:{b}"
                                  for n, b in zip((1, 2), binds)])
    hosts = [(f"02:00:00:00:00:0{i}", f"10.0.0.{i}") for i in (1, 2)]
    topo = tmp_path / "topo.yaml"

    rng = np.random.default_rng(23)
    calls: list[tuple[list[np.ndarray], np.ndarray | None, int]] = []
    xs = [(rng.standard_normal(LENGTH) * 10.0 ** rng.uniform(-3, 3, LENGTH)).astype(np.float32)
          for _ in hosts]
    for x in xs:
        x[3 * K:5 * K] = 0.0          # two blocks of zeros everywhere: EXP_ZERO maxima
    calls.append((xs, None, 0))
    xs2 = [-x for x in xs]            # other values, the same maxima
    calls.append((xs2, maxima(xs2), 0))
    xs3 = [x * 0.5 for x in xs]
    m3 = maxima(xs3)
    nb = len(m3)
    shifts = np.array([-1, 0, 1, 2, 3, 0, -1, 2] * nb)[:nb]
    pred3 = np.clip(m3.astype(int) + shifts, 0, 255).astype(np.uint8)
    pred3[10] = EXP_ZERO              # an EXP_ZERO prediction of a nonzero block: a miss
    pred3[3] = 200                    # any prediction of a zero block: a hit
    calls.append((xs3, pred3, 2))
    want_hit = [rule(p, maxima(c), s) if p is not None else None for c, p, s in calls]
    assert want_hit[2] is not None and not want_hit[2][0].all() and want_hit[2][0].sum() > 5

    job = JobConfig(job_id=3, num_workers=2, num_slots=SLOTS, k=K)
    timing = Timing(rto_initial=0.05, rto_min=0.01, progress_deadline=30.0)
    results: dict[int, list[AllreduceResult]] = {}
    errors: list[BaseException] = []

    def work(rank: int) -> None:
        mac, ip = hosts[rank]
        service = Endpoint.parse(SERVICE_MAC, SERVICE_IP)
        try:
            with FrameTransport(("127.0.0.1", udp[rank]), Endpoint.parse(mac, ip),
                                service, bind=("127.0.0.1", binds[rank]), k=K) as t:
                rounds = None
                out = results.setdefault(rank, [])
                for tensors, pred, slack in calls:
                    driver = Driver(t, route=False)
                    assert driver.native
                    core = NativeCore(tensors[rank], job, timing, rounds, t.frame_prefix,
                                      predict=pred, slack=slack)
                    driver.run(core)
                    res = core.result()
                    rounds = res.next_rounds
                    out.append(res)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    with procs:
        ready = daemon.start()
        udp = [ready.udp_ports[1], ready.udp_ports[2]]
        topo.write_text(yaml.safe_dump({
            "switches": [{"name": "s1", "grpc_addr": daemon.grpc_addr, "device_id": 0,
                          "ports": [1, 2], "service": {"mac": SERVICE_MAC, "ipv4": SERVICE_IP},
                          "slots": 256}],
            "hosts": [{"name": f"h{i}", "mac": mac, "ipv4": ip, "switch": "s1", "port": i}
                      for i, (mac, ip) in enumerate(hosts, 1)],
            "jobs": [{"id": 3, "workers": ["h1", "h2"], "slots": SLOTS}],
        }))
        ctl(topo, p4info, "setup", str(json_path))
        threads = [threading.Thread(target=work, args=(r,)) for r in (0, 1)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        assert not errors, errors
        assert_switch_clean(daemon.grpc_addr)

    for c, (tensors, pred, slack) in enumerate(calls):
        m = maxima(tensors)
        if pred is None:
            agreed, misses = m, 0
        else:
            hit_agreed = want_hit[c]
            assert hit_agreed is not None
            hit, agreed = hit_agreed
            misses = int((~hit).sum())
        want = reference_results(tensors, K, pred, slack)
        for rank in (0, 1):
            res = results[rank][c]
            assert res.tensor.tobytes() == want.tobytes(), (c, rank)
            assert np.array_equal(res.exponents, agreed), (c, rank)
            assert np.array_equal(res.maxima, m), (c, rank)
            assert res.stats.misses == misses, (c, rank)
            assert res.stats.bootstrap_packets == (SLOTS if pred is None else 0)
    assert results[0][2].stats.misses > 5          # the third call did miss
