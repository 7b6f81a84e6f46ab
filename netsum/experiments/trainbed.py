"""Training on the emulated network: every rank of a torch.distributed job in its own Mininet
host, so gloo's TCP and netsum's UDP leave the same host interface and cross the same P4 switch
on the same shaped links; the only difference between variants is the collective.

Owns:
- `TrainBed`: a Testbed (netsum/experiments/testbed.py) built without a job -- the training
  job's rank 0 registers its own, as under torchrun -- plus what ranks inside hosts need: the
  topology file with the switches' P4Runtime addresses, and `GrpcProxy`, which makes each
  switch's P4Runtime address (127.0.0.1:PORT in the root namespace) reachable at the same
  address inside every host's namespace;
- `TrainBed.run(comm, args)`: one variant's ranks started on their hosts with torchrun's
  environment (MASTER_ADDR: the first host's address on the emulated network;
  GLOO_SOCKET_IFNAME: the host's interface), interface counters sampled meanwhile, the job's P4
  counters read afterwards (the ranks keep the job: `--keep-job`; the driver reads and deletes
  it), and a `TrainRun` record of it all.

Why a proxy and not a management network: a Mininet host sees only its own loopback and its
link to the switch.  P4Runtime is control traffic of a few kilobytes per run (registration,
lease renewals); carrying it on the data links would put it on the measured links, a second
interface per host would change what `GLOO_SOCKET_IFNAME`-less gloo picks.  The proxy is a
thread of the driver; its listening sockets live in the hosts' namespaces.

Only one controller may be primary: the testbed's own session is closed before the ranks
start, and reopened (and closed) only between runs to set loss and read counters.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from netsum.experiments.testbed import NetSpec, Testbed, TestbedError, ring_order
from netsum.lifecycle import Started

__all__ = ["GrpcProxy", "TrainBed", "TrainRun", "EXAMPLE", "MASTER_PORT"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_digits.py"
MASTER_PORT = 29500        # torch's default, free inside every fresh host namespace


class GrpcProxy:
    """TCP forwarding from 127.0.0.1:PORT inside each given namespace to 127.0.0.1:PORT in
    this process's namespace, for each port; `close()` stops it and every connection."""

    def __init__(self, netns_paths: list[str], ports: list[int]) -> None:
        from netsum.training.register import in_netns
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        for path in netns_paths:
            for port in ports:
                with in_netns(path):          # the socket keeps the host's namespace
                    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                lst.bind(("127.0.0.1", port))
                lst.listen(8)
                lst.settimeout(0.2)
                self._socks.append(lst)
                self._spawn(self._accept, lst, port)

    def _spawn(self, target: Any, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True, name="grpc-proxy")
        self._threads.append(t)
        t.start()

    def _accept(self, lst: socket.socket, port: int) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = lst.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                up = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                conn.close()
                continue
            for s in (conn, up):
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._socks += [conn, up]
            self._spawn(self._pipe, conn, up)
            self._spawn(self._pipe, up, conn)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            for s in self._socks:
                try:
                    s.close()
                except OSError:
                    pass
            self._socks.clear()


@dataclass
class TrainRun:
    """One variant's training run on the bed."""
    comm: str
    ok: bool
    error: str
    metrics: dict[str, Any]            # rank 0's metrics.json
    telemetry: Any                     # netsum.experiments.telemetry.Telemetry
    p4: list[dict[str, object]]        # the run's job counters per (job, switch), at its end
    hosts: list[str]                   # per rank
    wall_s: float
    switch_cpu_s: float
    load_avg: tuple[float, float]      # 1-minute load average at the start and the end
    job_ids: list[int] = field(default_factory=list)


class TrainBed(Started):
    """A Mininet network for training runs; a context manager (module docstring)."""

    def __init__(self, spec: NetSpec, out_dir: Path, sample_interval: float = 0.1,
                 script: Path = EXAMPLE) -> None:
        self.spec = replace(spec, job=False)
        self.out_dir = out_dir
        self.tb = Testbed(self.spec, out_dir, sample_interval)
        self.script = script
        self.proxy: GrpcProxy | None = None
        self.topology_path = out_dir / "topology.yaml"
        self._runs = 0

    @property
    def topology(self) -> Any:
        return self.tb.topology

    def start(self) -> None:
        from netsum.rigtopo import plan_layout, topology_doc
        self.tb.start()
        s = self.spec
        grpc = {sw.name: sw.grpc_addr for sw in self.topology.switches}
        doc = topology_doc(plan_layout(s.workers, s.leaves), grpc, 4096)
        self.topology_path.write_text(yaml.safe_dump(doc))
        ports = sorted({int(a.rsplit(":", 1)[1]) for a in grpc.values()})
        paths = [f"/proc/{self.tb.net.get(h.name).pid}/ns/net" for h in self.topology.hosts]
        self.proxy = GrpcProxy(paths, ports)
        # Rank 0 of each run must be the one primary controller.
        ctl, self.tb.ctl = self.tb.ctl, None
        if ctl is not None:
            ctl.close()

    def close(self) -> None:
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            proxy.close()
        self.tb.close()

    # -- between runs: a controller session of the driver's own --------------------------------
    def _controller(self) -> Any:
        from netsum.controller.fabric import Controller
        from netsum.controller.topology import load_topology
        ctl = Controller(load_topology(str(self.topology_path)), timeout=60.0)
        try:
            ctl.connect()
            ctl.adopt()
        except BaseException:
            ctl.close()
            raise
        return ctl

    def set_loss(self, comm: str, loss: float) -> None:
        """`loss` per worker link and direction for this variant's collective traffic: the P4
        drop simulator for netsum's packets, iptables for gloo's TCP (testbed.set_loss)."""
        ctl = self._controller()
        self.tb.ctl = ctl
        try:
            self.tb.set_loss("ina" if comm.startswith("netsum") else "ring", loss)
        finally:
            self.tb.ctl = None
            ctl.close()

    def _collect_jobs(self) -> tuple[list[dict[str, object]], list[int]]:
        """Every job's counters, then the jobs deleted (the run kept them for this)."""
        ctl = self._controller()
        try:
            ids = sorted(ctl.jobs)
            rows = ctl.job_stats()
            for j in ids:
                ctl.delete_job(j)
            return rows, ids
        finally:
            ctl.close()

    # -- one variant -------------------------------------------------------------------------
    def env(self, rank: int, order: list[str], run_id: str) -> dict[str, str]:
        from netsum.experiments import mnswitch as M
        first = self.topology.host(order[0])
        node = self.tb.net.get(order[rank])
        world = len(order)
        return {**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")},
                "RANK": str(rank), "LOCAL_RANK": "0", "WORLD_SIZE": str(world),
                "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": str(rank), "ROLE_RANK": str(rank),
                "ROLE_WORLD_SIZE": str(world), "MASTER_ADDR": M.ipv4_text(first.ipv4),
                "MASTER_PORT": str(MASTER_PORT), "TORCHELASTIC_RUN_ID": run_id,
                "NETSUM_TOPOLOGY": str(self.topology_path), "NETSUM_HOST": order[rank],
                "GLOO_SOCKET_IFNAME": node.defaultIntf().name, "OMP_NUM_THREADS": "1",
                "PYTHONUNBUFFERED": "1",
                # A host's namespace reaches no DNS server: c10d's reverse look-ups of peer
                # addresses would each wait for the resolver's timeouts (5 s x 2 by default).
                "RES_OPTIONS": "timeout:1 attempts:1"}

    def run(self, comm: str, args: list[str], limit: float = 600.0, loss: float = 0.0,
            tag: str = "") -> TrainRun:
        """Train one variant (`--comm comm` plus `args` for the example) on every host."""
        from netsum.experiments.telemetry import Sampler
        from netsum.experiments.testbed import _cpu_seconds
        self._runs += 1
        run_id = f"run{self._runs:03d}-{comm}{('-' + tag) if tag else ''}"
        out = self.out_dir / "runs" / run_id
        out.mkdir(parents=True, exist_ok=True)
        self.set_loss(comm, loss)
        order = ring_order(self.topology)
        pids = self.tb.switch_pids()
        cpu0 = sum(_cpu_seconds(p) for p in pids)
        load0 = os.getloadavg()[0]
        sampler = Sampler(self.tb.interfaces(), self.tb.sample_interval).start()
        started = time.monotonic()
        error = ""
        try:
            children = []
            for rank, name in enumerate(order):
                argv = [sys.executable, str(self.script), "--comm", comm, "--out", str(out),
                        "--keep-job", *args]
                children.append(self.tb.procs.start(self.tb.net.get(name),
                                                    f"{run_id}-{name}", argv,
                                                    self.env(rank, order, run_id)))
            ok, error = self._wait(children, limit)
        finally:
            telemetry = sampler.stop()
            self.tb.procs.kill()
        wall = time.monotonic() - started
        cpu = sum(_cpu_seconds(p) for p in pids) - cpu0
        p4: list[dict[str, object]] = []
        ids: list[int] = []
        try:
            p4, ids = self._collect_jobs()
        except Exception as exc:  # noqa: BLE001 - a run without counters is still a run
            error = error or f"P4 counters: {type(exc).__name__}: {exc}"
        metrics: dict[str, Any] = {}
        try:
            metrics = json.loads((out / "metrics.json").read_text())
        except (OSError, ValueError):
            ok = False
            error = error or "rank 0 wrote no metrics.json"
        return TrainRun(comm, ok, error, metrics, telemetry, p4, order, wall, cpu,
                        (load0, os.getloadavg()[0]), ids)

    def _wait(self, children: list[Any], limit: float) -> tuple[bool, str]:
        deadline = time.monotonic() + limit
        while any(c.alive() for c in children):
            if time.monotonic() > deadline:
                return False, f"ranks still running after {limit:.0f} s (killed)"
            for sw in self.topology.switches:
                node = self.tb.net.get(sw.name)
                if not node.alive():
                    raise TestbedError(f"switch {sw.name} exited during training: "
                                       f"{node.logTail()}")
            if any(not c.alive() and c.popen.returncode != 0 for c in children):
                break           # a failed rank: the others would wait for it until the timeout
            time.sleep(0.2)
        errors = []
        for c in children:
            if c.alive():
                continue
            for line in c.log_tail(40).splitlines():
                if "error:" in line or "Error" in line:
                    errors.append(f"{c.name}: {line.strip()}")
                    break
            if c.popen.returncode != 0 and not errors:
                errors.append(f"{c.name}: exit status {c.popen.returncode}")
        ok = all(not c.alive() and c.popen.returncode == 0 for c in children)
        return ok, "; ".join(errors[:3])
