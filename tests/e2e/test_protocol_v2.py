"""Protocol v2 end to end, without privileges: a netsum-switch daemon with UDP-tunnel ports
running netsum.p4 (K=32), set up by netsum-ctl, and real workers.

* issue 25 point 2: one misconfigured member among four real `netsum-worker` processes (a
  member count of 8, K=64, a shorter tensor, more or fewer slots than the job's): every rank
  exits with a one-line error that names the mismatch or the refused rank's cause -- never
  exit 0 with a wrong sum, never a timeout that names no cause -- and the switch counts the
  refusals by reason.  The expectations come from what each worker was told.
* issue 22: reduce-scatter and NONFINITE through the daemon, workers in threads of this
  process (frame transport): each rank gets its own shard exact (against the float64 sum of
  the inputs), the flags come back ORed on every rank.
"""
from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

from helpers import (BIN, SwitchDaemon, assert_switch_clean, built_netsum, error_text,
                     free_udp_ports)
from netsum.procs import ProcessGroup
from netsum.tensors import check_result, reference
from netsum.workers import Endpoint, FrameTransport, JobConfig, Timing, Worker

SERVICE_MAC, SERVICE_IP = "02:00:00:00:00:fe", "10.0.0.254"
K = 32
N = 4
JOB = 3
SLOTS = 8


def ctl(topo: Path, p4info: Path, *args: str) -> str:
    flags = [a for a in args if a == "--json"]       # a global option: before the verb
    rest = [a for a in args if a != "--json"]
    proc = subprocess.run([str(BIN / "netsum-ctl"), *flags, "--topo", str(topo), "--p4info",
                           str(p4info), *rest], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


class Bench:
    """The daemon with N worker ports, the job set up; `hosts[r]` = (mac, ip), `udp[r]` the
    switch port's UDP port, `binds[r]` the worker's own (the port's fixed peer)."""

    def __init__(self, tmp: Path, procs: ProcessGroup) -> None:
        self.p4info, json_path = built_netsum(K)
        self.binds = free_udp_ports(N)
        self.daemon = SwitchDaemon(procs, [f"{r + 1}@udp:127.0.0.1:0=127.0.0.1:{b}"
                                           for r, b in enumerate(self.binds)])
        ready = self.daemon.start()
        self.udp = [ready.udp_ports[r + 1] for r in range(N)]
        self.hosts = [(f"02:00:00:00:00:0{r + 1}", f"10.0.0.{r + 1}") for r in range(N)]
        self.topo = tmp / "topo.yaml"
        self.topo.write_text(yaml.safe_dump({
            "switches": [{"name": "s1", "grpc_addr": self.daemon.grpc_addr, "device_id": 0,
                          "ports": list(range(1, N + 1)),
                          "service": {"mac": SERVICE_MAC, "ipv4": SERVICE_IP}, "slots": 256}],
            "hosts": [{"name": f"h{r + 1}", "mac": mac, "ipv4": ip, "switch": "s1",
                       "port": r + 1} for r, (mac, ip) in enumerate(self.hosts)],
            "jobs": [{"id": JOB, "workers": [f"h{r + 1}" for r in range(N)], "slots": SLOTS}],
        }))
        ctl(self.topo, self.p4info, "setup", str(json_path))

    def argv(self, rank: int, **over: object) -> list[str]:
        mac, ip = self.hosts[rank]
        opts: dict[str, object] = {"job": JOB, "workers": N, "slots": SLOTS, "k": K,
                                   "size": 2000, "seed": 5, "rank": rank, "timeout": 4,
                                   "rto": 0.02}
        opts.update(over)
        argv = [str(BIN / "netsum-worker"), "--frames", f"127.0.0.1:{self.udp[rank]}",
                "--bind", f"127.0.0.1:{self.binds[rank]}", "--mac", mac, "--ip", ip,
                "--service-mac", SERVICE_MAC, "--service-ip", SERVICE_IP, "--json", "--check"]
        for name, value in opts.items():
            argv += [f"--{name.replace('_', '-')}", str(value)]
        return argv

    def run_workers(self, overrides: dict[int, dict[str, object]]) -> list[tuple[int, str, str]]:
        procs = [subprocess.Popen(self.argv(r, **overrides.get(r, {})), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for r in range(N)]
        return [(p.returncode, out, error_text(err)) for p in procs
                for out, err in [p.communicate(120)]]

    def counters(self) -> dict[str, int]:
        rows = json.loads(ctl(self.topo, self.p4info, "--json", "stats"))
        row = next(r for r in rows if r["job"] == JOB)
        return {k: int(v) for k, v in row.items() if k.startswith(("reject_", "drop_")) and v}


CASES = {
    # rank: its wrong option; then what its own error and the refusal counter say
    "workers": ({0: {"workers": 8}}, 0, "rank 0 says 8 workers, job 3 has 4", "reject_workers"),
    "k": ({2: {"k": 64}}, 2, "this worker uses K=64, the switch K=32", "reject_k"),
    "slots_more": ({1: {"slots": 16}}, 1, "rank 1 uses slots beyond job 3's 8", "drop_bad_slot"),
}


@pytest.mark.slow
def test_one_misconfigured_member_never_yields_a_wrong_sum(tmp_path: Path) -> None:
    procs = ProcessGroup(tmp_path / "logs")
    with procs:
        bench = Bench(tmp_path, procs)
        # the control: everyone configured alike checks its sum against every rank's inputs
        for code, out, err in bench.run_workers({}):
            assert code == 0 and '"check": true' in out, err
        cases = dict(CASES)
        cases["shorter"] = ({3: {"size": 1000}}, None, "elements, the round recorded",
                            "reject_length")
        cases["slots_fewer"] = ({1: {"slots": 4}}, None, "offset", "reject_offset")
        for name, (over, who, says, counter) in cases.items():
            ctl(bench.topo, bench.p4info, "job", "reset", str(JOB))   # a new registration
            runs = bench.run_workers(over)
            for rank, (code, out, err) in enumerate(runs):
                assert code == 1, (name, rank, out, err)
                assert out.strip() == "", (name, rank, out)           # no result printed
                assert err.count("\n") == 1, (name, rank, err)        # one line
                assert "refused" in err, (name, rank, err)            # the cause, named
            named = [err for _, _, err in runs if says in err]
            if who is not None:
                assert says in runs[who][2], (name, runs[who][2])
            assert named, (name, [err for _, _, err in runs])
            assert bench.counters().get(counter, 0) > 0, (name, bench.counters())
        assert_switch_clean(bench.daemon.grpc_addr)


def _threads(bench: Bench, work: object) -> dict[int, object]:
    out: dict[int, object] = {}
    errors: list[BaseException] = []

    def one(rank: int) -> None:
        mac, ip = bench.hosts[rank]
        try:
            with FrameTransport(("127.0.0.1", bench.udp[rank]), Endpoint.parse(mac, ip),
                                Endpoint.parse(SERVICE_MAC, SERVICE_IP),
                                bind=("127.0.0.1", bench.binds[rank]), k=K) as t:
                w = Worker(t, JobConfig(JOB, N, SLOTS, K),
                           Timing(rto_initial=0.05, progress_deadline=30.0), rank=rank)
                out[rank] = work(w, rank)  # type: ignore[operator]
        except BaseException as exc:   # reported by the main thread
            errors.append(exc)
    threads = [threading.Thread(target=one, args=(r,)) for r in range(N)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors
    return out


@pytest.mark.slow
def test_reduce_scatter_and_nonfinite_through_the_daemon(tmp_path: Path) -> None:
    from netsum.wire import Flags
    from netsum.workers.blocks import even_shards, plan_blocks

    rng = np.random.default_rng(21)
    length = 5003
    xs = [(rng.standard_normal(length) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
          for _ in range(N)]
    shards = even_shards(length, N)
    plan = plan_blocks(length, K)
    flags = [np.zeros(plan.num_blocks, bool) for _ in range(N)]
    flags[1][7] = flags[3][100] = True
    procs = ProcessGroup(tmp_path / "logs")
    with procs:
        bench = Bench(tmp_path, procs)
        got = _threads(bench, lambda w, r: (w.reduce_scatter(xs[r]),
                                            w.allreduce(xs[r], nonfinite=flags[r])))
        at = 0
        want = np.zeros(plan.num_blocks, np.uint8)
        want[[7, 100]] = int(Flags.NONFINITE)
        for r in range(N):
            rs, ar = got[r]  # type: ignore[misc]
            verdict = check_result(rs.tensor, reference([x[at:at + shards[r]] for x in xs], K))
            assert verdict.ok, (r, verdict.problem)
            at += shards[r]
            np.testing.assert_array_equal(ar.flags, want)
            assert check_result(ar.tensor, reference(xs, K)).ok
        assert bench.counters() == {}
        assert_switch_clean(bench.daemon.grpc_addr)


def test_speculative_exponents_through_the_daemon(tmp_path: Path) -> None:
    """Speculative exponents (docs/quantization.md) on netsum.p4: a second call predicted from
    the first's maxima (+1, slack 2) is bit for bit the integer sum with the exponents the rule
    gives from the inputs (some blocks kept at the prediction, the others sent again), and so
    is a reduce-scatter's shard; then rank 3 predicting one binade above the others is
    refused by the switch (qexp differs from its round's), and no rank returns a sum."""
    from exactsums import reference_results, speculated

    from netsum.wire import Reason
    from netsum.workers import quant
    from netsum.workers.blocks import even_shards
    from netsum.workers.errors import RejectedError, WorkerTimeoutError

    rng = np.random.default_rng(33)
    length = 32 * 90 + 7
    first = [(rng.standard_normal(length) * 3.0).astype(np.float32) for _ in range(N)]
    # each block's magnitude moves by -3..0 binades: some predictions hit, some miss
    scale = np.repeat(2.0 ** rng.integers(-3, 1, -(-length // K)), K)[:length]
    second = [(rng.standard_normal(length) * 3.0 * scale).astype(np.float32)
              for _ in range(N)]
    m1 = np.max([quant.block_exponents(x, K) for x in first], axis=0)
    m2 = np.max([quant.block_exponents(x, K) for x in second], axis=0)
    predict = np.minimum(m1.astype(int) + 1, 255)
    shards = even_shards(length, N)
    procs = ProcessGroup(tmp_path / "logs")
    with procs:
        bench = Bench(tmp_path, procs)

        failures: dict[int, BaseException] = {}

        def work(w: Worker, r: int) -> object:
            a = w.allreduce(first[r])
            b = w.allreduce(second[r], predict=a.maxima + 1, slack=2)
            rs = w.reduce_scatter(second[r], predict=predict_rs, slack=2)
            try:     # rank 3 predicts one binade above the others
                w.allreduce(second[r], predict=predict + (r == 3), slack=2)
            except (RejectedError, WorkerTimeoutError) as exc:
                failures[r] = exc
            return a, b, rs
        from netsum.workers.blocks import plan_blocks
        plan = plan_blocks(length, K, shards)
        # the reduce-scatter's blocks are cut per shard: predicted from the inputs' maxima
        rs_max = np.max([quant.block_exponents(np.concatenate(
            [np.pad(x[a:a + n], (0, -n % K)) for a, n in zip(np.cumsum([0, *shards[:-1]]),
                                                              shards)]), K)
            for x in second], axis=0)
        assert len(rs_max) == plan.num_blocks
        predict_rs = rs_max.astype(int)          # exact: every block kept at the first use
        got = _threads(bench, work)
        want = reference_results(second, K, predict, 2)
        used = speculated(m2, predict, 2)
        misses = int(((used != predict) & (m2 != 0)).sum())
        assert 0 < misses < len(m2)
        at = 0
        for r in range(N):
            a, b, rs = got[r]  # type: ignore[misc]
            np.testing.assert_array_equal(a.maxima, m1)
            np.testing.assert_array_equal(b.tensor, want)
            np.testing.assert_array_equal(b.exponents, used)
            assert b.stats.misses == misses and b.stats.bootstrap_packets == 0
            shard = reference_results([x[at:at + shards[r]] for x in second], K)
            np.testing.assert_array_equal(rs.tensor, shard)
            assert rs.stats.misses == 0 and rs.stats.bootstrap_packets == 0
            at += shards[r]
        assert sorted(failures) == list(range(N)), "a rank returned a sum"
        refused = [e for e in failures.values() if isinstance(e, RejectedError)]
        assert refused and all(e.reason == Reason.QEXP for e in refused)
        counted = bench.counters()
        assert set(counted) == {"reject_qexp"} and counted["reject_qexp"] >= len(refused)
