"""One Mininet network for experiments: hosts, P4 switches and shaped links, and the runs of
all-reduce algorithms on it (in-network through the switches, ring and parameter server
between the hosts), each with its telemetry.

Owns:
- `NetSpec` -> a network: one switch with n hosts, or a two-level tree (netsum.rigtopo's
  plan: workers dealt over 2 leaves), `TCLink(bw=...)` on every link, netsum-switch (or
  simple_switch_grpc) per switch, hosts configured, the controller with the pipeline,
  forwarding and one aggregation job over every host;
- `Testbed.run(algo, inputs, loss)`: loss injected the same way per link for every algorithm
  (see `set_loss`), the worker processes started on their hosts to begin together
  (`--start-at`), telemetry sampled meanwhile (netsum.experiments.telemetry), the outcome checked against
  the float64 reference (netsum.jobrun), and a `Run` record of it all;
- clean-up: `close()` stops workers, the sampler, the controller and Mininet, whatever
  happened; the context manager and the callers' Ctrl-C path end there.

Loss.  The P4 drop simulator drops netsum packets only, with probability p on every worker
port in each direction; the host algorithms' TCP is not netsum traffic, so for them each host
drops arriving packets (iptables `statistic` match in its namespace) with probability
1 - (1 - p)^2: a host-to-host packet crosses two worker links, so its end-to-end loss is the
same as with p on each link.  (This kernel has no netem, and tc has no gact module.)
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import yaml

from netsum.lifecycle import Started
from netsum.wire import K_DEFAULT

__all__ = ["NetSpec", "Run", "Testbed", "TestbedError", "HostProcs", "ring_order",
           "root_interfaces"]

JOB_ID = 1


class TestbedError(Exception):
    """A network or run could not be set up.  str() is the one line the user sees."""


@dataclass(frozen=True, slots=True)
class NetSpec:
    workers: int
    topo: str = "single"          # single | tree (2 leaves)
    bw: float | None = None       # Mb/s on every link; None: unshaped
    k: int = K_DEFAULT
    target: str = "embedded"      # embedded | bmv2
    slots: int = 256
    seed: int = 0
    timeout: float = 20.0         # a worker's no-progress deadline (s)
    ina_args: tuple[str, ...] = ()   # extra netsum-worker options for INA runs (timing)
    piece_bytes: int = 16384      # the host algorithms' message size
    job: bool = True              # create JOB_ID over every host (False: training registers its own)

    @property
    def leaves(self) -> int:
        return 2 if self.topo == "tree" else 0


@dataclass
class Run:
    """One run of one algorithm on the testbed."""
    algo: str
    loss: float
    outcome: Any                        # netsum.jobrun.JobOutcome
    start_at: float                     # wall clock the workers were told to begin at
    late_s: list[float]                 # per worker: how late it began
    telemetry: Any                      # netsum.experiments.telemetry.Telemetry
    latencies: list[np.ndarray]         # per worker: per-chunk latency (s)
    hosts: list[str]                    # per rank: the host it ran on
    injected_drops: int                 # packets the loss injection dropped
    switch_cpu_s: float                 # CPU time of all switch processes during the run
    load_avg: float                     # 1-minute load average at the start
    p4: list[dict[str, object]] = field(default_factory=list)   # job counters per switch

    @property
    def time_s(self) -> float:
        """From the common start to the last worker's finish."""
        return max((late + w.elapsed_s for late, w in zip(self.late_s, self.outcome.workers)),
                   default=float("nan"))


def ring_order(topology: Any) -> list[str]:
    """Hosts in ring order: grouped by switch, so only one ring hop enters and one leaves
    each leaf (a rank order that alternates leaves would put n/2 streams on each uplink)."""
    return [h.name for h in sorted(topology.hosts, key=lambda h: (h.switch, h.port))]


def root_interfaces(topology: Any) -> list[str]:
    """The switch ports Mininet makes in the root namespace (`SWITCH-ethPORT`), for the
    guard: host links' switch ends and both ends of every switch-to-switch link."""
    names = [f"{h.switch}-eth{h.port}" for h in topology.hosts]
    for ln in topology.links:
        names += [f"{ln.a}-eth{ln.a_port}", f"{ln.b}-eth{ln.b_port}"]
    return names


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    # utime, stime, cutime, cstime: fields 14-17 of stat (indices 11-14 after the comm).
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class HostProcs:
    """Worker processes started on Mininet hosts; `kill()` leaves none running."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[Any] = []
        self._logs: list[IO[bytes]] = []

    def start(self, node: Any, name: str, argv: list[str],
              env: dict[str, str] | None = None) -> Any:
        from netsum.procs import Child
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        fh = open(log_path, "wb")
        self._logs.append(fh)
        extra: dict[str, Any] = {} if env is None else {"env": env}
        popen = node.popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           **extra)
        child = Child(name, popen, log_path)
        self.children.append(child)
        return child

    def kill(self) -> None:
        for c in self.children:
            if c.alive():
                c.popen.kill()
        for c in self.children:
            c.popen.wait()
        self.children.clear()
        for fh in self._logs:
            fh.close()
        self._logs.clear()


class Testbed(Started):
    """A Mininet network built from a NetSpec; a context manager."""

    def __init__(self, spec: NetSpec, out_dir: Path, sample_interval: float = 0.1,
                 p4_interval: float = 0.5) -> None:
        self.spec = spec
        self.out_dir = out_dir
        self.log_dir = out_dir / "logs"
        self.sample_interval = sample_interval
        self.p4_interval = p4_interval
        self.net: Any = None
        self.ctl: Any = None
        self.topology: Any = None
        self.procs = HostProcs(self.log_dir)
        self.guard: Any = None
        self._runs = 0
        self._bin = Path(sys.executable).parent

    # -- the network ------------------------------------------------------------------------
    def start(self) -> None:
        from netsum.experiments import mnenv
        problem = mnenv.environment_problem()
        if problem:
            raise TestbedError(problem)
        from mininet.link import TCLink
        from mininet.log import setLogLevel
        from mininet.net import Mininet

        from netsum.experiments import mnswitch as M
        from netsum.controller.errors import ControllerError
        from netsum.controller.topology import JobSpec, parse_topology
        from netsum.rigtopo import plan_layout, topology_doc

        s = self.spec
        layout = plan_layout(s.workers, s.leaves)
        doc = topology_doc(layout, {sw.name: "127.0.0.1:1" for sw in layout.switches}, 4096)
        topology = parse_topology(yaml.safe_dump(doc), "<testbed>")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            json_path, info_path, executable = M.build_program(s.k, s.target,
                                                               self.out_dir / "p4")
        except M.NetsumMininetError as exc:
            raise TestbedError(str(exc)) from None
        params: dict[str, Any] = {"logDir": str(self.log_dir), "seed": s.seed}
        if executable is not None:
            params["executable"] = executable
        # Cleans the root-namespace interfaces, switches and host namespaces even if this
        # process is killed outright (no finally runs then): netsum/experiments/mnguard.py.
        from netsum.experiments import mnguard
        self.guard = mnguard.Guard()
        self.guard.start()
        for name in root_interfaces(topology):
            self.guard.note("intf", name)
        setLogLevel("critical" if s.bw else "warning")   # htb's "quantum is big" warnings
        self.net = Mininet(topo=M.TopoFromFile(topology, bw=s.bw, freeGrpc=True, **params),
                           switch=M.NetsumSwitch, link=TCLink, controller=None,
                           autoSetMacs=False, autoStaticArp=False, build=False,
                           waitConnected=False)
        try:
            self.net.build()
            for host in self.net.hosts:
                self.guard.note("netns", str(host.pid))
            M.set_link_mtu(self.net, s.k)
            setLogLevel("warning")
            self.net.start()
        except M.NetsumMininetError as exc:
            raise TestbedError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - Mininet raises bare Exceptions
            raise TestbedError("Mininet could not start the network: "
                               f"{' '.join(str(exc).split())}") from None
        M.configure_hosts(self.net, topology)
        for h in topology.hosts:
            # The baseline's best case: a connection idle since the hand-shake (the workers
            # wait for their common start) keeps its window instead of slow-starting again.
            self.net.get(h.name).cmd("sysctl -qw net.ipv4.tcp_slow_start_after_idle=0")
        self.topology = M.with_grpc_addrs(topology, self.net)
        try:
            self.ctl = M.start_controller(self.topology, info_path, json_path, rpc_timeout=60.0)
            if s.job:
                self.ctl.create_job(JobSpec(JOB_ID, tuple(h.name for h in topology.hosts),
                                            s.slots))
        except ControllerError as exc:
            raise TestbedError(f"controller: {exc}") from None

    def close(self) -> None:
        self.procs.kill()
        ctl, self.ctl = self.ctl, None
        if ctl is not None:
            try:
                ctl.close()
            except Exception:  # noqa: BLE001 - closing must not hide the original error
                pass
        net, self.net = self.net, None
        if net is not None:
            net.stop()
        guard, self.guard = self.guard, None
        if guard is not None:
            guard.forget()
            guard.close()

    def switch_pids(self) -> list[int]:
        return [self.net.get(sw.name).process.pid for sw in self.topology.switches
                if self.net.get(sw.name).process is not None]

    def interfaces(self) -> list[Any]:
        """Every host's interface (in its namespace) and every switch port (root
        namespace), named by link: `h1-s1` for a host link, `leaf1-root` for an uplink."""
        from netsum.experiments.telemetry import Interface
        out = []
        for h in self.topology.hosts:
            node = self.net.get(h.name)
            out.append(Interface(h.name, node.defaultIntf().name, f"/proc/{node.pid}/net/dev",
                                 f"{h.name}-{h.switch}"))
            out.append(Interface(h.switch, f"{h.switch}-eth{h.port}", "/proc/self/net/dev",
                                 f"{h.name}-{h.switch}"))
        for ln in self.topology.links:
            for name, port, peer in ((ln.a, ln.a_port, ln.b), (ln.b, ln.b_port, ln.a)):
                out.append(Interface(name, f"{name}-eth{port}", "/proc/self/net/dev",
                                     f"{min(name, peer)}-{max(name, peer)}"))
        return out

    # -- loss -------------------------------------------------------------------------------
    def set_loss(self, algo: str, loss: float) -> None:
        """Drop probability `loss` per worker link and direction, for `algo`'s traffic (the
        other kind of injection is switched off)."""
        sim = loss if algo == "ina" else 0.0
        for h in self.topology.hosts:
            self.ctl.set_drop(h.switch, h.port, sim, "both")
        q = 0.0 if algo == "ina" else 1.0 - (1.0 - loss) ** 2
        for h in self.topology.hosts:
            node = self.net.get(h.name)
            node.cmd("iptables -F INPUT")
            if q > 0:
                out = node.cmd(f"iptables -A INPUT -m statistic --mode random --probability "
                               f"{q:.6f} -j DROP && echo ok")
                if "ok" not in out:
                    raise TestbedError(f"{h.name}: iptables cannot drop packets: "
                                       f"{out.strip()}")

    def _host_drops(self) -> int:
        total = 0
        for h in self.topology.hosts:
            out = self.net.get(h.name).cmd("iptables -L INPUT -v -x -n -Z")
            for line in out.splitlines():
                parts = line.split()
                if len(parts) > 2 and parts[2] == "DROP" and parts[0].isdigit():
                    total += int(parts[0])
        return total

    def _sim_drops(self) -> int:
        rows = self.ctl.port_stats()
        ports = {(h.switch, h.port) for h in self.topology.hosts}
        return sum(int(r["sim_drops_in"]) + int(r["sim_drops_out"]) for r in rows
                   if (r["switch"], r["port"]) in ports)

    # -- runs -------------------------------------------------------------------------------
    def run(self, algo: str, inputs: list[np.ndarray], loss: float = 0.0,
            keep_results: bool = False, start_margin: float | None = None) -> Run:
        """All-reduce `inputs` (one per host, in topology order) with `algo` (ina, ring,
        ps) under `loss`; returns the record once every worker has exited."""
        from netsum.jobrun import RunningJob
        from netsum.rig import job_counters
        from netsum.experiments.telemetry import Sampler
        from netsum.tensors import reference
        from netsum.workers import quant

        s = self.spec
        self._runs += 1
        tag = f"run{self._runs:03d}-{algo}"
        job_dir = self.out_dir / "tensors"
        job_dir.mkdir(parents=True, exist_ok=True)
        hosts = [h.name for h in self.topology.hosts]
        order = hosts if algo == "ina" else ring_order(self.topology)
        by_host = dict(zip(hosts, inputs))
        ranked = [by_host[name] for name in order]
        ref = reference(ranked, s.k)
        ins = [job_dir / f"{tag}-in{r}.npy" for r in range(len(order))]
        outs = [job_dir / f"{tag}-out{r}.npy" for r in range(len(order))]
        lats = [job_dir / f"{tag}-lat{r}.npy" for r in range(len(order))]
        for path, x in zip(ins, ranked):
            np.save(path, np.asarray(x, dtype=np.float32))
        if algo == "ina":
            self.ctl.reset_job(JOB_ID)          # a new epoch, counters from zero
            drops_before = self._sim_drops()
        self.set_loss(algo, loss)
        if algo != "ina":
            self._host_drops()                  # zero the rule's counters
        # Python start-up of n workers on a loaded 2-core machine takes seconds: begin
        # together after it (a late worker is reported, its lateness counted in time_s).
        margin = (1.0 + 0.35 * len(order)) if start_margin is None else start_margin
        start_at = time.time() + margin
        load = os.getloadavg()[0]
        pids = self.switch_pids()
        cpu0 = sum(_cpu_seconds(p) for p in pids)
        sampler = Sampler(self.interfaces(), self.sample_interval,
                          (lambda: [r for r in self.ctl.job_stats() if r["job"] == JOB_ID]),
                          self.p4_interval)
        sampler.start()
        try:
            for rank, name in enumerate(order):
                argv = self._argv(algo, rank, name, order, ins[rank], outs[rank], lats[rank],
                                  start_at)
                self.procs.start(self.net.get(name), f"{tag}-{name}", argv)
            blocks = quant.num_blocks(int(ref.total.size), s.k)
            counters = ((lambda j: job_counters(self.ctl, j)) if algo == "ina"
                        else (lambda _j: {}))
            running = RunningJob(counters, JOB_ID, list(self.procs.children), ref, ins, outs,
                                 blocks, min(s.slots, blocks), time.monotonic())

            def tick(_job: RunningJob) -> None:
                for sw in self.topology.switches:
                    if not self.net.get(sw.name).alive():
                        raise TestbedError(f"switch {sw.name} exited during {tag}: "
                                           f"{self.net.get(sw.name).logTail()}")
            outcome = running.wait(timeout=None, on_tick=tick, keep_results=keep_results)
        finally:
            telemetry = sampler.stop()
            self.procs.kill()
        cpu = sum(_cpu_seconds(p) for p in pids) - cpu0
        drops = (self._sim_drops() - drops_before) if algo == "ina" else self._host_drops()
        p4 = [r for r in self.ctl.job_stats() if r["job"] == JOB_ID] if algo == "ina" else []
        late, latencies = [], []
        for child, lat in zip(outcome.workers, lats):
            latencies.append(np.load(lat) if lat.exists() else np.empty(0))
            lat.unlink(missing_ok=True)
        for rank in range(len(order)):
            late.append(_late(self.log_dir / f"{tag}-{order[rank]}.log"))
        return Run(algo, loss, outcome, start_at, late, telemetry, latencies, order, drops,
                   cpu, load, p4)

    def _argv(self, algo: str, rank: int, name: str, order: list[str], inp: Path, out: Path,
              lat: Path, start_at: float) -> list[str]:
        from netsum.experiments import mnswitch as M
        s = self.spec
        worker = self._bin / "netsum-worker"
        argv = [str(worker) if worker.exists() else "netsum-worker", "--workers",
                str(len(order)), "--k", str(s.k), "--input", str(inp), "--output", str(out),
                "--latencies", str(lat), "--timeout", str(s.timeout), "--json",
                "--start-at", f"{start_at:.6f}"]
        h = self.topology.host(name)
        if algo == "ina":
            svc = self.topology.switch(h.switch).service
            return [*argv, "--job", str(JOB_ID), "--slots", str(s.slots), "--udp",
                    M.ipv4_text(svc.ipv4), "--bind", f"{M.ipv4_text(h.ipv4)}:{h.udp_port}",
                    *s.ina_args]
        peers = ",".join(M.ipv4_text(self.topology.host(n).ipv4) for n in order)
        return [*argv, "--algo", algo, "--job", str(1000 + self._runs % 60000), "--peers",
                peers, "--rank", str(rank), "--piece-bytes", str(s.piece_bytes)]


def _late(log: Path) -> float:
    """start_late_s of a worker's JSON line (0 when absent)."""
    import json
    try:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                return float(json.loads(line).get("start_late_s", 0.0))
    except (OSError, ValueError):
        pass
    return 0.0
