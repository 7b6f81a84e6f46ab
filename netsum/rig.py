"""The end-to-end rig: switch daemon(s), the controller, N netsum-worker processes.

Owns the life cycle of a whole run (a job's wait, outcome and check are netsum.jobrun's; the
addressing plan is netsum.rigtopo's): build the P4 program for K, write a topology file, start
the switch (`netsum-switch`, or real `simple_switch_grpc` for `Target.BMV2`) on UDP-tunnel ports
(`Mode.UDP`, no privileges), on shared-memory ports (`Mode.SHM`, no privileges: frame rings
instead of loopback UDP, netsum/shmring.py) or on veth pairs into network namespaces
(`Mode.NETNS`, root) --
or, with `leaves`, a two-level SHARP-style tree of switch daemons joined by UDP links -- push
pipeline, forwarding and the drop simulator through `netsum.controller.fabric.Controller`, then run
jobs: each job gets a fresh id and a fresh slot range (or, asked to, runs again under its id
after a reset: a new epoch), its workers are real `netsum-worker` processes reading their
tensors from .npy files and writing the sums back, and the rig checks every sum against the
float64 reference within the documented bound (netsum.tensors) and, after every job, each
switch's health (netsum.health: internal errors and the job's refusals must be 0).

UDP-tunnel ports have fixed peers: each host's local address is chosen before the switch
starts (`Rig.peers`), is that port's one peer on the switch's command line, and is what the
host's worker binds.

Invariant: everything the rig starts or creates is recorded (processes in a ProcessGroup,
namespaces and veths in a NetnsLab) and `close()` removes all of it, whatever happened;
`Rig` is a context manager and callers turn Ctrl-C into an exception that reaches `close()`.
"""
from __future__ import annotations

import dataclasses
import enum
import json
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from netsum import health
from netsum.controller.errors import AllocationError, ControllerError
from netsum.controller.fabric import Controller, load_program
from netsum.controller.topology import JobSpec, load_topology
from netsum.jobrun import JobOutcome, RunningJob, WorkerOutcome
from netsum.lifecycle import Started
from netsum.netns import NetnsError, NetnsLab, netns_available
from netsum.p4rt.client import Endpoint
from netsum.procs import Child, ProcessGroup
from netsum.rigtopo import SUBNET_PREFIX, HostPlan, plan_layout, topology_doc
from netsum.switchproc import (RigError, SwitchReady, free_tcp_ports, free_udp_ports,
                               parse_ready_line, wait_switch_ready)
from netsum.tensors import Reference, reference
from netsum.shmring import DEFAULT_FRAME, frame_for
from netsum.wire import K_DEFAULT, K_SUPPORTED, MAX_WORKERS, UDP_PORT, packet_bytes
from netsum.workers import quant
from netsum.workers.errors import WorkerError
from netsum.workers.hostcli import ALGORITHMS
from netsum.workers.hostnet import DEFAULT_PORT as HOST_PORT

__all__ = ["Mode", "Target", "RigConfig", "RigError", "WorkerOutcome", "JobOutcome",
           "RunningJob", "Rig", "missing_bmv2_tools", "job_counters", "SwitchReady",
           "parse_ready_line", "wait_switch_ready", "free_udp_ports", "free_tcp_ports",
           "ALGORITHMS"]

POOL_SLOTS = 4096          # the default build's NETSUM_SLOTS
MAX_JOB_ID = 255           # NETSUM_MAX_JOBS - 1
HOST_JOB_BASE = 1000       # ids of host (ring, ps) jobs: apart from the switch's job ids
BMV2_TOOLS = ("simple_switch_grpc", "p4c-bm2-ss")


#: The veth MTU of namespace hosts when K's frames do not fit Ethernet's 1500 bytes (K > 256:
#: 2-8 KB frames, emulation beyond a Tofino-class switch; docs/protocol.md).
JUMBO_MTU = 9000


def link_mtu(k: int) -> int:
    """The MTU a namespace host's veth pair needs for K's frames: 0 (the kernel's 1500) up to
    K = 256, JUMBO_MTU beyond (K = 2048: 8244 bytes of IP)."""
    ip_bytes = packet_bytes(k) - 14
    if ip_bytes > JUMBO_MTU:
        raise RigError(f"K={k}: {ip_bytes}-byte IP packets exceed the {JUMBO_MTU}-byte MTU")
    return 0 if ip_bytes <= 1500 else JUMBO_MTU


class Mode(enum.Enum):
    UDP = "udp"        # frame-over-UDP switch ports on 127.0.0.1 (unprivileged)
    SHM = "shm"        # shared-memory frame rings per switch port (unprivileged, one machine)
    NETNS = "netns"    # namespaces + veth + kernel UDP; switch on AF_PACKET ports (root)


class Target(enum.Enum):
    EMBEDDED = "embedded"   # netsum-switch + netsum-p4c output
    BMV2 = "bmv2"           # real simple_switch_grpc + real p4c output


@dataclass(frozen=True, slots=True)
class RigConfig:
    work_dir: Path
    workers: int = 4
    k: int = K_DEFAULT
    mode: Mode = Mode.UDP
    target: Target = Target.EMBEDDED
    loss: float = 0.0            # drop-simulator probability on every worker port, both ways
    slots: int = 256             # each job's slot range (the workers' window)
    timeout: float = 10.0        # a worker's no-progress deadline (s)
    seed: int = 1                # the switch's random() (drop simulator)
    switch_profile: Path | None = None   # run the embedded switch under cProfile, stats here
    leaves: int = 0              # 0: one switch; >= 2: a two-level tree with that many leaves
    bystanders: int = 0          # hosts on further ports in no job (isolation tests)
    pcap: bool = False           # the embedded switch writes pcap files to work_dir/pcap/

    def __post_init__(self) -> None:
        if not 1 <= self.workers <= MAX_WORKERS:
            raise RigError(f"workers must be 1..{MAX_WORKERS}, got {self.workers}")
        if self.k not in K_SUPPORTED:
            raise RigError(f"K must be one of {', '.join(map(str, K_SUPPORTED))}, got {self.k}")
        if not 0.0 <= self.loss < 1.0:
            raise RigError(f"loss must be in [0, 1), got {self.loss}")
        if not 1 <= self.slots <= POOL_SLOTS:
            raise RigError(f"slots must be 1..{POOL_SLOTS}, got {self.slots}")
        if self.timeout <= 0:
            raise RigError("timeout must be positive")
        if self.leaves and not 2 <= self.leaves <= self.workers:
            raise RigError(f"leaves must be 0 (one switch) or 2..{self.workers} (one worker "
                           f"per leaf at least), got {self.leaves}")
        if self.mode is Mode.SHM and self.target is not Target.EMBEDDED:
            raise RigError("shared-memory ports (mode shm) exist on the embedded switch only")
        if self.leaves and (self.mode is not Mode.UDP or self.target is not Target.EMBEDDED):
            raise RigError("a tree (leaves >= 2) runs in mode udp on the embedded switch only")
        if self.bystanders < 0 or (self.bystanders and self.leaves):
            raise RigError("bystanders (hosts in no job) sit on the single switch: give "
                           "leaves 0 and bystanders >= 0")


def missing_bmv2_tools() -> list[str]:
    return [t for t in BMV2_TOOLS if shutil.which(t) is None]


def job_counters(ctl: Controller, job_id: int) -> dict[str, int]:
    """A job's counters summed over the switches where workers contribute: in a tree the
    leaves (the root counts the leaves' partial sums, which would count them twice).  {} when
    the switches cannot be read (a progress display must not fail the job)."""
    try:
        rows = ctl.job_stats()
    except ControllerError:
        return {}
    mine = [r for r in rows if r["job"] == job_id]
    if any(r["role"] == "leaf" for r in mine):
        mine = [r for r in mine if r["role"] == "leaf"]
    total: dict[str, int] = {}
    for row in mine:
        for key, value in row.items():
            if isinstance(value, int) and key != "job":
                total[key] = total.get(key, 0) + value
    return total


class Rig(Started):
    """One switch, its controller, and the jobs run through it.  Use as a context manager."""

    def __init__(self, config: RigConfig, say: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.say = say or (lambda _m: None)
        self.work_dir = config.work_dir
        self.procs = ProcessGroup(config.work_dir / "logs")
        self.lab: NetnsLab | None = None
        self.ctl: Controller | None = None
        self.layout = plan_layout(config.workers, config.leaves, config.bystanders)
        self.switches: dict[str, Child] = {}
        self.grpc_addrs: dict[str, str] = {}     # switch name -> its P4Runtime address
        self.udp_ports: dict[int, int] = {}      # worker rank -> its switch port's UDP port
        # UDP mode: host name -> the address it sends from, its switch port's one peer; and
        # host name -> that switch port's own UDP port (bystanders included).
        self.peers: dict[str, tuple[str, int]] = {}
        self.port_udp: dict[str, int] = {}
        self.job_ranks: dict[int, tuple[int, ...]] = {}   # switch job id -> its workers' ranks
        self.port_specs: dict[str, str] = {}     # host name -> its switch port's `-i` spec
        self.shm_paths: dict[str, str] = {}      # SHM: host name -> its port's socket path
        self._shm_dir: str | None = None
        self.topology_path = config.work_dir / "topology.yaml"
        self._next_job = 1
        self._next_slot = 0
        self._next_host_job = 0
        self._bin = Path(sys.executable).parent

    @property
    def switch(self) -> Child | None:
        """The single switch, or the tree's root."""
        return self.switches.get(self.layout.switches[0].name)

    @property
    def controller(self) -> Controller:
        if self.ctl is None:
            raise RigError("the rig is not started (or already closed)")
        return self.ctl

    # -- life cycle -------------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self._check_target()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        json_path, info_path = self._build()
        ifaces: dict[str, list[str]] = {sw.name: [] for sw in self.layout.switches}
        if cfg.mode is Mode.NETNS:
            reason = netns_available()
            if reason:
                raise RigError(f"mode netns is not available here: {reason} (use --mode udp)")
            # Random, not pid-based: one process may run several rigs (tests, benchmarks).
            self.lab = NetnsLab(tag=secrets.token_hex(3))
            try:
                for h in (*self.layout.hosts, *self.layout.bystanders):
                    sw = self.layout.switch(h.switch)
                    net = self.lab.add_host(h.rank + 1, h.mac, h.ipv4, SUBNET_PREFIX,
                                            arp={sw.service_ip: sw.service_mac},
                                            mtu=link_mtu(cfg.k))
                    self.port_specs[h.name] = f"{h.port}@{net.switch_if}"
                    ifaces[h.switch].append(self.port_specs[h.name])
            except NetnsError as exc:
                raise RigError(f"cannot set up namespaces: {exc}") from None
        elif cfg.mode is Mode.SHM:
            # A short directory of its own: a Unix socket path holds at most 107 bytes.
            self._shm_dir = tempfile.mkdtemp(prefix="netsum-shm-")
            for h in (*self.layout.hosts, *self.layout.bystanders):
                self.shm_paths[h.name] = f"{self._shm_dir}/{h.name}.sock"
                # K > 256 frames need longer ring buffers than the default frame=2048.
                frame = frame_for(packet_bytes(cfg.k))
                self.port_specs[h.name] = (f"{h.port}@shm:{self.shm_paths[h.name]}"
                                           + (f",frame={frame}" if frame != DEFAULT_FRAME else ""))
                ifaces[h.switch].append(self.port_specs[h.name])
        else:
            every = (*self.layout.hosts, *self.layout.bystanders)
            for h, addr in zip(every, free_udp_ports(len(every))):
                # The switch's side is `:0` (its ready line says what it bound); the host's
                # side is fixed here, before either exists, as the port's one peer.
                self.peers[h.name] = ("127.0.0.1", addr)
                self.port_specs[h.name] = f"{h.port}@udp:127.0.0.1:0=127.0.0.1:{addr}"
                ifaces[h.switch].append(self.port_specs[h.name])
            # Switch-to-switch links: a UDP port on each side, each the other's peer.
            for sw in self.layout.switches:
                if sw.role != "leaf":
                    continue
                for port, peer, peer_port in sw.links:
                    a, b = free_udp_ports(2)
                    ifaces[sw.name].append(f"{port}@udp:127.0.0.1:{a}=127.0.0.1:{b}")
                    ifaces[peer].append(f"{peer_port}@udp:127.0.0.1:{b}=127.0.0.1:{a}")
        ready = {sw.name: self._start_switch(sw.name, ifaces[sw.name], json_path)
                 for sw in self.layout.switches}
        grpc: dict[str, str] = {}
        for name, r in ready.items():
            if r.grpc_addr is None:
                raise RigError(f"switch {name} started without P4Runtime")
            grpc[name] = r.grpc_addr
        self.grpc_addrs = dict(grpc)
        if cfg.mode is Mode.UDP:
            for h in (*self.layout.hosts, *self.layout.bystanders):
                try:
                    self.port_udp[h.name] = ready[h.switch].udp_ports[h.port]
                except KeyError:
                    raise RigError(f"switch {h.switch} did not report UDP port {h.port} in its "
                                   "ready line") from None
            self.udp_ports = {h.rank: self.port_udp[h.name] for h in self.layout.hosts}
        self.topology_path.write_text(yaml.safe_dump(
            topology_doc(self.layout, grpc, POOL_SLOTS), sort_keys=False))
        self._write_manifest()
        self._configure(info_path, json_path)

    def close(self) -> None:
        """Stop every process and delete every namespace/interface; idempotent.  A second
        Ctrl-C or SIGTERM during clean-up is held back until it is finished (then delivered)."""
        held = {signal.SIGINT, signal.SIGTERM}
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            ctl, self.ctl = self.ctl, None
            if ctl is not None:
                try:
                    ctl.close()
                except Exception:  # noqa: BLE001 - closing must not hide the original error
                    pass
            self.procs.stop()
            if self.lab is not None:
                self.lab.close()
                self.lab = None
            if self._shm_dir is not None:
                shutil.rmtree(self._shm_dir, ignore_errors=True)
                self._shm_dir = None
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def detach_controller(self) -> None:
        """Close the rig's P4Runtime sessions, so that another controller -- a training job's
        rank 0, which registers its own job -- can become primary.  Job methods of the rig
        need the controller and fail after this."""
        ctl, self.ctl = self.ctl, None
        if ctl is not None:
            ctl.close()

    # -- set-up steps -----------------------------------------------------------------------------
    def _check_target(self) -> None:
        if self.config.target is Target.BMV2:
            missing = missing_bmv2_tools()
            if missing:
                raise RigError(f"target bmv2 needs real {' and '.join(BMV2_TOOLS)} on PATH; "
                               f"missing: {', '.join(missing)} (they are not installable here; "
                               "use --target embedded)")
            if self.config.mode is not Mode.NETNS:
                raise RigError("target bmv2 has no UDP-tunnel ports: it needs --mode netns "
                               "(root)")

    def _build(self) -> tuple[Path, Path]:
        from netsum import build
        try:
            target = build.target_for(self.config.k)
            if self.config.target is Target.BMV2:
                return build.build_target(target, self.work_dir / "p4", build.Backend.P4C)
            try:
                return build.ensure_built(self.config.k)
            except PermissionError:
                # Stale or missing build/ in a checkout this user may not write (CI runs the
                # unprivileged tier as another user): build a private copy instead.
                return build.build_target(target, self.work_dir / "p4")
        except build.BuildError as exc:
            raise RigError(f"P4 build failed: {exc}") from None
        except OSError as exc:
            raise RigError(f"P4 build failed: cannot write the outputs: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a compiler crash is reported in one line
            raise RigError(f"P4 build failed: the compiler crashed on p4/netsum.p4 (K="
                           f"{self.config.k}): {type(exc).__name__}: {exc}") from None

    def _start_switch(self, name: str, ifaces: list[str], json_path: Path) -> SwitchReady:
        log_name = "switch" if not self.layout.is_tree else f"switch-{name}"
        if self.config.target is Target.BMV2:
            # simple_switch_grpc does not report an ephemeral gRPC port: pick one.
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            argv = [shutil.which("simple_switch_grpc") or "simple_switch_grpc", "--no-p4",
                    "--device-id", "0", *[a for i in ifaces for a in ("-i", i)], "--",
                    "--grpc-server-addr", f"127.0.0.1:{port}"]
            child = self.procs.start(log_name, argv)
            self.switches[name] = child
            return SwitchReady(self._wait_grpc(child, f"127.0.0.1:{port}"), {})
        # `python -m switch` is netsum-switch; under cProfile the daemon writes its stats when
        # it stops on SIGTERM (it returns from main rather than exiting from the handler).
        head = [str(self._bin / "netsum-switch")]
        if self.config.switch_profile is not None:
            head = [sys.executable, "-m", "cProfile", "-o", str(self.config.switch_profile),
                    "-m", "netsum.switch"]
        pcap: list[str] = []
        if self.config.pcap:
            where = self.work_dir / "pcap" / name
            where.mkdir(parents=True, exist_ok=True)
            pcap = ["--pcap", str(where)]
        argv = [*head, "--no-p4", "--device-id", "0", *pcap,
                "--seed", str(self.config.seed), *[a for i in ifaces for a in ("-i", i)],
                "--", "--grpc-server-addr", "127.0.0.1:0"]
        child = self.procs.start(log_name, argv)
        self.switches[name] = child
        return wait_switch_ready(child)

    def _wait_grpc(self, child: Child, addr: str) -> str:
        host, port = addr.rsplit(":", 1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not child.alive():
                raise RigError(f"the switch exited at start: {child.log_tail()}")
            with socket.socket() as s:
                if s.connect_ex((host, int(port))) == 0:
                    return addr
            time.sleep(0.1)
        raise RigError(f"the switch did not open {addr} within 30 s")

    def _write_manifest(self) -> None:
        """run.json: what this rig made (switch pid, ports, namespaces), for debugging a run
        and for checking after it that nothing is left."""
        doc = {"switch_pid": self.switch.popen.pid if self.switch else None,
               "switch_pids": {n: c.popen.pid for n, c in self.switches.items()},
               "udp_ports": self.udp_ports,
               "namespaces": [h.name for h in self.lab.hosts] if self.lab else [],
               "interfaces": [h.switch_if for h in self.lab.hosts] if self.lab else []}
        (self.work_dir / "run.json").write_text(json.dumps(doc, indent=1))

    def _configure(self, info_path: Path, json_path: Path) -> None:
        try:
            topo = load_topology(self.topology_path)
            # 30 s per call: pushing a K=256 pipeline takes longer than 5 s on a loaded machine.
            ctl = Controller(topo, load_program(info_path, json_path), timeout=30.0)
            self.ctl = ctl
            ctl.connect()
            self._push()
        except ControllerError as exc:
            raise RigError(f"controller: {exc}") from None

    def _push(self) -> None:
        """Pipeline (fresh registers), forwarding, and the drop simulator on every port."""
        ctl = self.controller
        ctl.push_pipeline()
        ctl.install_forwarding()
        if self.config.loss > 0:
            for h in self.layout.hosts:
                ctl.set_drop(h.switch, h.port, self.config.loss, "both")
        self._next_slot = 0
        self._next_job = 1

    # -- jobs -------------------------------------------------------------------------------------
    def counters(self, job_id: int) -> dict[str, int]:
        return job_counters(self.controller, job_id)

    def start_job(self, inputs: Sequence[np.ndarray], worker_args: Sequence[str] = (),
                  algo: str = "ina", ranks: Sequence[int] | None = None,
                  job_id: int | None = None) -> RunningJob:
        """Start one all-reduce of `inputs` (one tensor per worker, any float32 shape).
        `worker_args` go on every worker's `netsum-worker` command line (e.g. timing options).
        `algo`: "ina" through the switch; "ring" or "ps", the host baselines over TCP between
        the workers (netsum.workers.ring, workers.ps) on the same hosts, with no switch job: in mode
        netns their traffic crosses the switch as plain L2 forwarding, in mode udp (no
        namespaces) it goes straight over loopback.
        `ranks`: the workers of this job (default all; jobs on disjoint ranks may run at once).
        `job_id`: run an earlier job of this rig again, under its id and slots: the controller
        resets it (a new epoch, counters zeroed) first, as new worker processes need."""
        cfg = self.config
        if algo not in ALGORITHMS:
            raise RigError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algo!r}")
        if job_id is not None:
            if job_id not in self.job_ranks:
                raise RigError(f"job {job_id} was not started by this rig")
            ranks = self.job_ranks[job_id] if ranks is None else tuple(ranks)
            if tuple(ranks) != self.job_ranks[job_id]:
                raise RigError(f"job {job_id} has workers {self.job_ranks[job_id]}, not {ranks}")
        ranks = tuple(range(cfg.workers)) if ranks is None else tuple(ranks)
        if not ranks or len(set(ranks)) != len(ranks) or \
                not all(0 <= r < cfg.workers for r in ranks):
            raise RigError(f"ranks must be distinct workers of 0..{cfg.workers - 1}, got {ranks}")
        if algo != "ina" and ranks != tuple(range(cfg.workers)):
            raise RigError("host all-reduce jobs take every worker")
        if len(inputs) != len(ranks):
            raise RigError(f"{len(inputs)} tensors for {len(ranks)} workers")
        try:
            ref = reference(inputs, cfg.k)
        except (ValueError, WorkerError) as exc:
            raise RigError(f"bad input tensors: {exc}") from None
        blocks = quant.num_blocks(int(ref.total.size), cfg.k)
        if algo != "ina":
            return self._start_host_job(inputs, ref, blocks, algo, worker_args)
        slots = cfg.slots
        try:
            if job_id is not None:
                self.controller.reset_job(job_id)
            else:
                if self._next_slot + slots > POOL_SLOTS or self._next_job > MAX_JOB_ID:
                    # A slot range is never reused by a later job (its registers keep the
                    # old job's rounds); when the pool or the job ids are used up, a fresh
                    # pipeline clears every register and the controller's job table.
                    self._push()
                job_id = self._next_job
                spec = JobSpec(job_id, tuple(self.layout.hosts[r].name for r in ranks), slots)
                self.controller.create_job(spec)
                self._next_job += 1
                self._next_slot += slots
                self.job_ranks[job_id] = ranks
        except AllocationError as exc:
            # Another job holds the slots this one needs: the same all-reduce on the hosts
            # (netsum.workers.ring: same quantization, same integer sums, same check), as ATP does.
            if ranks != tuple(range(cfg.workers)):
                raise RigError(f"controller: job {self._next_job}: {exc}") from None
            reason = f"no switch slots: {exc.message}"
            self.say(f"job {self._next_job}: {reason}; running it as a host ring all-reduce "
                     "(netsum.workers.ring) instead")
            job = self._start_host_job(inputs, ref, blocks, "ring", worker_args)
            job.fallback = reason
            return job
        except ControllerError as exc:
            raise RigError(f"controller: job {job_id or self._next_job}: {exc}") from None
        ins, outs = self._write_inputs(job_id, inputs)
        started = time.monotonic()
        children = [self.procs.start(f"job{job_id}-w{rank}-{int(started * 1000) % 10**6}",
                                     [*self._worker_argv(job_id, rank, len(ranks), ins[i],
                                                         outs[i]),
                                      "--rank", str(i),   # its rank in the job: named in errors
                                      *worker_args])
                    for i, rank in enumerate(ranks)]
        window = min(slots, blocks)
        leaves = sum(1 for sw in self.layout.switches if sw.role == "leaf")
        return RunningJob(self.counters, job_id, children, ref, ins, outs, blocks, window,
                          started, len(ranks) + leaves)

    def _write_inputs(self, job_id: int,
                      inputs: Sequence[np.ndarray]) -> tuple[list[Path], list[Path]]:
        job_dir = self.work_dir / f"job{job_id}-{int(time.time() * 1000) % 10**8}"
        job_dir.mkdir(parents=True)
        ins = [job_dir / f"in{i}.npy" for i in range(len(inputs))]
        outs = [job_dir / f"out{i}.npy" for i in range(len(inputs))]
        for path, x in zip(ins, inputs):
            np.save(path, np.asarray(x, dtype=np.float32))
        return ins, outs

    def host_peers(self) -> list[str]:
        """Each worker's listening address for a host all-reduce, in rank (ring) order."""
        if self.config.mode is Mode.NETNS:
            return [f"{h.ipv4}:{HOST_PORT}" for h in self.layout.hosts]
        return [f"127.0.0.1:{p}" for p in free_tcp_ports(self.config.workers)]

    def _start_host_job(self, inputs: Sequence[np.ndarray], ref: Reference, blocks: int,
                        algo: str, worker_args: Sequence[str]) -> RunningJob:
        cfg = self.config
        # Host jobs have no switch state; their ids only tell the workers' streams apart.
        job_id = HOST_JOB_BASE + self._next_host_job
        self._next_host_job = (self._next_host_job + 1) % (0xFFFF - HOST_JOB_BASE)
        ins, outs = self._write_inputs(job_id, inputs)
        peers = ",".join(self.host_peers())
        started = time.monotonic()
        children = []
        for rank in range(cfg.workers):
            argv = [str(self._bin / "netsum-worker"), "--algo", algo, "--job", str(job_id),
                    "--workers", str(cfg.workers), "--k", str(cfg.k), "--peers", peers,
                    "--rank", str(rank), "--input", str(ins[rank]), "--output",
                    str(outs[rank]), "--timeout", str(cfg.timeout), "--json", *worker_args]
            if self.lab is not None:
                argv = self.lab.hosts[rank].exec_argv(argv)
            children.append(self.procs.start(f"job{job_id}-{algo}-w{rank}", argv))
        return RunningJob(lambda _j: {}, job_id, children, ref, ins, outs, blocks,
                          min(cfg.slots, blocks), started)

    def run_job(self, inputs: Sequence[np.ndarray],
                on_tick: Callable[[RunningJob], None] | None = None,
                worker_args: Sequence[str] = (), algo: str = "ina",
                keep_results: bool = False) -> JobOutcome:
        return self.wait_job(self.start_job(inputs, worker_args, algo), on_tick, keep_results)

    def wait_job(self, job: RunningJob,
                 on_tick: Callable[[RunningJob], None] | None = None,
                 keep_results: bool = False) -> JobOutcome:
        """Wait for a job's workers; RigError at once if the switch dies meanwhile."""
        def tick(j: RunningJob) -> None:
            # Workers would only notice a dead switch after their deadline; say why at once.
            for name, sw in self.switches.items():
                if not sw.alive():
                    which = "the switch" if not self.layout.is_tree else f"switch {name}"
                    raise RigError(f"{which} exited during job {j.job_id} (status "
                                   f"{sw.popen.returncode}): {sw.log_tail(5)}")
            if on_tick is not None:
                on_tick(j)
        # No overall timeout: the workers fail themselves after `timeout` without progress.
        outcome = job.wait(timeout=None, on_tick=tick, keep_results=keep_results)
        checked = self.health(job.job_id if job.job_id in self.job_ranks else None)
        return dataclasses.replace(outcome, problems=tuple(health.problems(checked)),
                                   health=health.summary(checked))

    def health(self, job_id: int | None = None) -> list[health.SwitchHealth]:
        """Every switch's should-be-zero statistics and first internal error, with the refusal
        counters of switch job `job_id` (None: a host job, which has no switch state)."""
        refusals: dict[str, dict[str, int]] = {}
        if job_id is not None:
            try:
                refusals = health.job_refusals(self.controller.job_stats(), job_id)
            except ControllerError as exc:
                raise RigError(f"controller: reading job {job_id}'s counters: {exc}") from None
        out = []
        for name, addr in self.grpc_addrs.items():
            mine = refusals.get(name, {})
            if self.config.target is Target.BMV2:
                out.append(health.SwitchHealth(name, None, None, mine))
            else:
                out.append(health.read_switch(name, Endpoint(addr, 0), mine))
        return out

    def _worker_argv(self, job_id: int, rank: int, workers: int, in_path: Path,
                     out_path: Path) -> list[str]:
        cfg = self.config
        argv = [str(self._bin / "netsum-worker"), "--job", str(job_id), "--workers",
                str(workers), "--slots", str(cfg.slots), "--k", str(cfg.k),
                "--input", str(in_path), "--output", str(out_path),
                "--timeout", str(cfg.timeout), "--json"]
        h = self.layout.hosts[rank]
        sw = self.layout.switch(h.switch)
        if cfg.mode is Mode.NETNS:
            assert self.lab is not None
            argv += ["--udp", sw.service_ip, "--bind", f"{h.ipv4}:{UDP_PORT}"]
            return self.lab.hosts[rank].exec_argv(argv)
        frame = ["--mac", h.mac, "--ip", h.ipv4, "--port", str(UDP_PORT),
                 "--service-mac", sw.service_mac, "--service-ip", sw.service_ip]
        if cfg.mode is Mode.SHM:
            return [*argv, "--shm", self.shm_paths[h.name], *frame]
        host, port = self.peers[h.name]
        return [*argv, "--frames", f"127.0.0.1:{self.udp_ports[rank]}", "--bind",
                f"{host}:{port}", *frame]

    def pcap_in(self, name: str) -> Path:
        """The pcap file of what host `name`'s switch port received (RigConfig.pcap)."""
        from netsum.switch.ports import parse_port_spec

        h = self.host(name)
        spec = parse_port_spec(self.port_specs[name])
        return self.work_dir / "pcap" / h.switch / f"{spec.pcap_name}_in.pcap"

    def host(self, name: str) -> HostPlan:
        """A worker or bystander host of the layout by name."""
        for h in (*self.layout.hosts, *self.layout.bystanders):
            if h.name == name:
                return h
        raise RigError(f"no host {name!r} in this rig")
