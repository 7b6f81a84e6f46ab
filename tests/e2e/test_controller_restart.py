"""Kill and restart a real `netsum-switch` daemon under a running `netsum-ctl run`: the
controller notices, restores pipeline, forwarding, jobs and groups, and real `netsum-worker`
processes complete an allreduce through the daemon's UDP ports before and after.  Also: loss
set with the drop simulator is recovered by the workers and shows in the per-port counters."""
from __future__ import annotations

import ipaddress
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from netsum.controller.topology import parse_topology
from helpers import BIN, SwitchDaemon, assert_switch_clean, built_netsum, free_udp_ports
from netsum.procs import ProcessGroup
from netsum.wire import K_DEFAULT

ROOT = Path(__file__).resolve().parents[2]
K = K_DEFAULT


@pytest.fixture(scope="module")
def netsum_program() -> tuple[Path, Path]:
    return built_netsum(K)


class Lines:
    """The controller's stdout, line by line, with a timeout."""

    def __init__(self, stream) -> None:  # type: ignore[no-untyped-def]
        self.q: queue.Queue[str] = queue.Queue()
        self.all: list[str] = []
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            text = line.decode(errors="replace")
            self.all.append(text)
            self.q.put(text)

    def wait_for(self, fragment: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            try:
                line = self.q.get(timeout=0.2)
            except queue.Empty:
                continue
            seen.append(line)
            if fragment in line:
                return line
        raise AssertionError(f"no {fragment!r} in controller output: {seen}")


@pytest.fixture
def rig(netsum_program: tuple[Path, Path], tmp_path: Path) -> Iterator[tuple[Any, ...]]:
    """netsum-switch with UDP ports 1..4 (bound ports read from its ready line; each port's
    fixed peer chosen here) under `netsum-ctl run`; the daemon restarts on the same addresses.
    Yields, per switch port, (its UDP port, the address a worker on it binds)."""
    info, js = netsum_program
    with ProcessGroup(tmp_path / "logs") as procs:
        binds = dict(zip((1, 2, 3, 4), free_udp_ports(4)))
        daemon = SwitchDaemon(procs, [f"{n}@udp:127.0.0.1:0=127.0.0.1:{b}"
                                      for n, b in binds.items()])
        udp = {n: (p, binds[n]) for n, p in daemon.start().udp_ports.items()}
        doc = yaml.safe_load((ROOT / "examples" / "single.yaml").read_text())
        doc["switches"][0]["grpc_addr"] = daemon.grpc_addr
        topo_path = tmp_path / "single.yaml"
        topo_path.write_text(yaml.safe_dump(doc))
        ctl = subprocess.Popen([str(BIN / "netsum-ctl"), "run", "--topo", str(topo_path),
                                "--p4info", str(info), str(js), "--interval", "0.3"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            yield parse_topology(topo_path.read_text()), daemon, ctl, Lines(ctl.stdout), udp
        finally:
            if ctl.poll() is None:
                os.kill(ctl.pid, signal.SIGINT)
                try:
                    ctl.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    ctl.kill()
                    ctl.wait()
            daemon.kill()


def run_workers(procs: ProcessGroup, topo: Any, udp: dict[int, tuple[int, int]],
                size: int = 2000) -> list[str]:
    """Job 2's workers (h1 on port 1, h2 on port 2) as real netsum-worker processes in `procs`
    sending frames into the daemon's UDP ports; each checks the sum of every rank's synthetic
    tensor.  Returns "rc=N " + each worker's output."""
    svc = topo.switch("s1").service
    children = []
    for rank, (port, name) in enumerate(((1, "h1"), (2, "h2"))):
        h = topo.host(name)
        job = next(j for j in topo.jobs if j.id == 2)
        argv = [str(BIN / "netsum-worker"), "--job", "2", "--workers", str(len(job.workers)),
                "--slots", str(job.slots), "--k", str(K),
                "--frames", f"127.0.0.1:{udp[port][0]}", "--bind", f"127.0.0.1:{udp[port][1]}",
                "--mac", ":".join(f"{b:02x}" for b in h.mac.to_bytes(6, "big")),
                "--ip", str(ipaddress.IPv4Address(h.ipv4)), "--port", str(h.udp_port),
                "--service-mac", ":".join(f"{b:02x}" for b in svc.mac.to_bytes(6, "big")),
                "--service-ip", str(ipaddress.IPv4Address(svc.ipv4)),
                "--size", str(size), "--rank", str(rank), "--seed", "7", "--check",
                "--timeout", "20"]
        # A fresh log name per call: a second round must not read the first one's output.
        children.append(procs.start(f"{name}-{len(procs.children)}", argv))
    outs = []
    for child in children:
        try:
            child.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.popen.kill()
            child.popen.wait()
        assert child.log_path is not None
        outs.append(f"rc={child.popen.returncode} "
                    + child.log_path.read_text(errors="replace"))
    return outs


def test_switch_restart_is_restored_and_a_job_completes(rig) -> None:  # type: ignore[no-untyped-def]
    topo, daemon, ctl, lines, udp = rig
    lines.wait_for("controller running")
    for out in run_workers(daemon.procs, topo, udp):
        assert out.startswith("rc=0") and "check ok" in out, out

    daemon.kill()
    daemon.start()
    line = lines.wait_for("restored s1")
    assert "pipeline missing" in line or "stream reconnected" in line
    # The restarted switch lost its registers with everything else; the restored tables and
    # groups carry a whole allreduce of new worker processes.
    for out in run_workers(daemon.procs, topo, udp):
        assert out.startswith("rc=0") and "check ok" in out, out
    assert_switch_clean(daemon.grpc_addr)
    assert ctl.poll() is None
    # Ctrl-C ends it cleanly, and nothing but its own lines was printed (no gRPC core logs,
    # no tracebacks) through the restart.
    os.kill(ctl.pid, signal.SIGINT)
    assert ctl.wait(timeout=20) == 0
    lines.thread.join(timeout=10)
    assert all(line.startswith(("controller running", "restored s1")) for line in lines.all), \
        lines.all


def test_drop_simulator_loss_is_recovered(rig) -> None:  # type: ignore[no-untyped-def]
    """10 % loss both ways on h1's port, set beside the running controller (its own election
    id): the workers retransmit, still finish with the right sum, and the counters show it."""
    topo, daemon, ctl, lines, udp = rig
    lines.wait_for("controller running")
    topo_file = next(a for a in ctl.args if str(a).endswith(".yaml"))
    p = subprocess.run([str(BIN / "netsum-ctl"), "dropsim", "set", "1", "0.1", "--direction",
                        "both", "--topo", str(topo_file), "--election-id", "0,2"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    outs = run_workers(daemon.procs, topo, udp, size=20000)
    for out in outs:
        assert out.startswith("rc=0") and "check ok" in out, out
    retx = [int(o.split(" retransmissions")[0].rsplit(" ", 1)[-1]) for o in outs]
    assert sum(retx) > 0
    p = subprocess.run([str(BIN / "netsum-ctl"), "stats", "--ports", "--json", "--topo",
                        str(topo_file), "--election-id", "0,3"],
                       capture_output=True, text=True, timeout=60)
    port1 = next(r for r in json.loads(p.stdout) if r["port"] == 1)
    assert port1["sim_drops_in"] > 0 and port1["sim_drops_out"] > 0
