"""Privileged: INA against the host all-reduces under Mininet (netsum/experiments/testbed.py,
mininet/sweep.py), on shaped links, with telemetry.

A 4-worker star and a 2x2 tree (a root and two leaves with two workers each) run INA and the
ring on the same hosts and links: every result meets the documented bound against the
float64 sum, and INA's and the ring's agree bit for bit (exact int32 sums of the same agreed
exponents).  In the tree the root's counters show one contribution per leaf per chunk.  A
one-point sweep writes the CSV files and every PNG; Ctrl-C stops everything it started.
"""
from __future__ import annotations

import csv
import gzip
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers import built_netsum
from netsum.wire import K_DEFAULT

ROOT = Path(__file__).resolve().parents[2]
MN_DIR = ROOT / "mininet"
SWEEP = MN_DIR / "sweep.py"

pytestmark = [pytest.mark.privileged, pytest.mark.slow]

PLOTS = ("time_vs_size.png", "goodput_vs_workers.png", "speedup.png", "retx_vs_loss.png",
         "latency_cdf.png", "utilisation.png")


@pytest.fixture(scope="module")
def tb() -> Iterator[Any]:
    """The testbed module, once Mininet can run here."""
    from netsum.experiments import mnenv
    problem = mnenv.environment_problem()
    if problem:
        pytest.skip(problem)
    built_netsum(K_DEFAULT)                 # the testbed's default K
    from netsum.experiments import testbed
    yield testbed


def _leftovers(names: tuple[str, ...], marker: str) -> tuple[set[str], list[str]]:
    """Interfaces of these switches still in the root namespace, and processes still running
    a switch on them or naming `marker` (the run's directory) on their command line."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    links = {ln.split(":")[1].strip().split("@")[0] for ln in out.splitlines()}
    ifs = {n for n in links if any(n.startswith(f"{s}-eth") for s in names)}
    procs = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and (marker in cmd or any(f"@{s}-eth" in cmd for s in names)):
            procs.append(cmd)
    return ifs, procs


def _ina_and_ring(tb: Any, spec: Any, out: Path) -> tuple[Any, Any]:
    from netsum.tensors import synthetic_inputs
    inputs = synthetic_inputs(spec.workers, (30_000,), seed=3)
    with tb.Testbed(spec, out) as bed:
        ina = bed.run("ina", inputs, keep_results=True)
        ring = bed.run("ring", inputs, keep_results=True)
    for run in (ina, ring):
        for w in run.outcome.workers:
            assert w.ok, f"{run.algo} worker {w.rank}: {w.error}"
            assert w.error_ratio <= 1.0
    # Per host, the same sum: INA and the ring agree exactly.
    a = dict(zip(ina.hosts, ina.outcome.results))
    b = dict(zip(ring.hosts, ring.outcome.results))
    assert set(a) == set(b)
    for host in a:
        assert np.array_equal(a[host], b[host]), host
    return ina, ring


def _host_tx(run: Any) -> int:
    return sum(c.tx_bytes for (node, _), c in run.telemetry.totals().items()
               if node.startswith("h"))


def test_star_of_4_ina_and_ring(tb: Any, tmp_path: Path) -> None:
    spec = tb.NetSpec(4, "single", bw=50.0)
    ina, ring = _ina_and_ring(tb, spec, tmp_path)
    tensor = 4 * 30_000
    # Telemetry saw the traffic: every INA worker sends its tensor (plus headers) once; a
    # ring worker 2(n-1)/n of it (plus TCP headers and ACKs).
    assert _host_tx(ina) >= 4 * tensor
    assert 4 * 1.5 * tensor <= _host_tx(ring) <= 4 * 1.5 * tensor * 1.15
    (row,) = ina.p4
    blocks = -(-30_000 // spec.k)
    assert row["data_in"] - row["retx"] == 4 * (blocks + min(spec.slots, blocks))
    assert ring.p4 == [] and len(ring.telemetry.samples) >= 2
    assert _leftovers(("s1",), str(tmp_path)) == (set(), [])


def test_tree_2x2_root_sees_one_contribution_per_leaf(tb: Any, tmp_path: Path) -> None:
    spec = tb.NetSpec(4, "tree", bw=50.0)
    ina, ring = _ina_and_ring(tb, spec, tmp_path)
    blocks = -(-30_000 // spec.k)
    uses = blocks + min(spec.slots, blocks)
    roles = {r["switch"]: r for r in ina.p4}
    root = roles["root"]
    assert root["data_in"] - root["retx"] == 2 * uses        # one per leaf, not one per worker
    extra = 0
    for leaf in ("leaf1", "leaf2"):
        # Two workers per use, and the root's result coming down -- again when the root
        # answers a retransmitted partial it had already summed.
        net = roles[leaf]["data_in"] - roles[leaf]["retx"]
        assert net >= 3 * uses
        extra += net - 3 * uses
    assert extra <= root["retx"]
    # The ring crossed the root too: its uplinks carried one stream each way.
    up = {k: c for k, c in ring.telemetry.totals().items() if k[0] == "root"}
    assert len(up) == 2 and all(c.tx_bytes > 30_000 * 4 * 0.7 for c in up.values())
    assert _leftovers(("root", "leaf1", "leaf2"), str(tmp_path)) == (set(), [])


def test_one_point_sweep_writes_the_csv_and_every_png(tb: Any, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, str(SWEEP), "--workers", "2", "--size", "20000e",
                           "--bw", "50", "--reps", "1", "--algo", "ina,ring", "--out",
                           str(out)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    with open(out / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["algo"], r["ok"], r["workers"]) for r in rows] == [("ina", "True", "2"),
                                                                   ("ring", "True", "2")]
    assert all(float(r["time_s"]) > 0 and float(r["host_tx_bytes"]) > 0 for r in rows)
    assert int(rows[0]["data_in"]) > 0
    with gzip.open(out / "telemetry.csv.gz", "rt") as fh:
        tel = list(csv.DictReader(fh))
    assert {r["source"] for r in tel} == {"iface", "p4"}
    for name in ("summary.csv", "latency_quantiles.csv", "sweep.json", *PLOTS):
        assert (out / name).stat().st_size > 0, name
    assert "[2/2]" in proc.stdout
    assert _leftovers(("s1",), str(out)) == (set(), [])


def test_ctrl_c_stops_everything(tb: Any, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    proc = subprocess.Popen([sys.executable, str(SWEEP), "--workers", "4", "--size", "4MB",
                             "--bw", "5", "--reps", "3", "--algo", "ring", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            logs = out / f"net-single-n4-bw5-k{K_DEFAULT}-embedded" / "logs"
            if list(logs.glob("run*-h*.log")):
                break
            time.sleep(0.2)
        time.sleep(2.0)                         # workers running, the link busy
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert _leftovers(("s1",), str(out)) == (set(), [])


def test_killed_sweep_leaves_nothing(tb: Any, tmp_path: Path) -> None:
    """SIGKILL to the sweep's whole process group mid-run (no finally runs): the guard
    (netsum/experiments/mnguard.py) still removes the tree's switch-to-switch links, the switches, the
    workers and their namespaces."""
    out = tmp_path / "sweep"
    names = ("root", "leaf1", "leaf2")
    proc = subprocess.Popen([sys.executable, str(SWEEP), "--workers", "4", "--topo", "tree",
                             "--size", "4MB", "--bw", "5", "--reps", "3", "--algo", "ring",
                             "--out", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            logs = out / f"net-tree-n4-bw5-k{K_DEFAULT}-embedded" / "logs"
            if list(logs.glob("run*-h*.log")):
                break
            time.sleep(0.2)
        time.sleep(2.0)                         # workers running, the links busy
        assert _leftovers(names, str(out))[0], "the network was never up"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 30
    while _leftovers(names, str(out)) != (set(), []) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _leftovers(names, str(out)) == (set(), [])


def test_k1024_runs_over_jumbo_links(tb: Any, tmp_path: Path) -> None:
    """K = 1024 (4,120-byte frames) through Mininet: every link at the jumbo MTU, the INA sums
    equal to the ring's (TCP over the same links) bit for bit, each within its bound.  At
    Ethernet's 1500 bytes every DATA would be refused by the kernel (message too long)."""
    spec = tb.NetSpec(4, "single", k=1024)
    ina, _ = _ina_and_ring(tb, spec, tmp_path)
    (row,) = ina.p4
    blocks = -(-30_000 // 1024)
    assert row["data_in"] - row["retx"] == 4 * (blocks + min(spec.slots, blocks))
