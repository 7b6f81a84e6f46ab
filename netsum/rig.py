"""The end-to-end rig: switch daemon(s), the controller, N netsum-worker processes.

Owns the life cycle of a whole run (a job's wait, outcome and check are netsum.jobrun's; the
addressing plan is netsum.rigtopo's): build the P4 program for K, write a topology file, start
the switch (`netsum-switch`, or real `simple_switch_grpc` for `Target.BMV2`) on UDP-tunnel ports
(`Mode.UDP`, no privileges) or on veth pairs into network namespaces (`Mode.NETNS`, root) --
or, with `leaves`, a two-level SHARP-style tree of switch daemons joined by UDP links -- push
pipeline, forwarding and the drop simulator through `controller.fabric.Controller`, then run
jobs: each job gets a fresh id and a fresh slot range, its workers are real `netsum-worker`
processes reading their tensors from .npy files and writing the sums back, and the rig checks
every sum against the float64 reference within the documented bound (netsum.tensors).

Invariant: everything the rig starts or creates is recorded (processes in a ProcessGroup,
namespaces and veths in a NetnsLab) and `close()` removes all of it, whatever happened;
`Rig` is a context manager and callers turn Ctrl-C into an exception that reaches `close()`.
"""
from __future__ import annotations

import enum
import json
import re
import secrets
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from controller.errors import ControllerError
from controller.fabric import Controller, load_program
from controller.topology import JobSpec, load_topology
from netsum.jobrun import JobOutcome, RunningJob, WorkerOutcome
from netsum.netns import NetnsError, NetnsLab, netns_available
from netsum.procs import Child, ProcessGroup
from netsum.rigtopo import SUBNET_PREFIX, plan_layout, topology_doc
from netsum.tensors import Reference, reference
from wireformat import K_DEFAULT, K_SUPPORTED, MAX_WORKERS, UDP_PORT
from workers import quant
from workers.errors import WorkerError
from workers.hostcli import ALGORITHMS
from workers.hostnet import DEFAULT_PORT as HOST_PORT

__all__ = ["Mode", "Target", "RigConfig", "RigError", "WorkerOutcome", "JobOutcome",
           "RunningJob", "Rig", "missing_bmv2_tools", "job_counters", "SwitchReady",
           "parse_ready_line", "wait_switch_ready", "free_udp_ports", "free_tcp_ports",
           "ALGORITHMS"]

POOL_SLOTS = 4096          # the default build's NETSUM_SLOTS
MAX_JOB_ID = 255           # NETSUM_MAX_JOBS - 1
HOST_JOB_BASE = 1000       # ids of host (ring, ps) jobs: apart from the switch's job ids
BMV2_TOOLS = ("simple_switch_grpc", "p4c-bm2-ss")


class Mode(enum.Enum):
    UDP = "udp"        # frame-over-UDP switch ports on 127.0.0.1 (unprivileged)
    NETNS = "netns"    # namespaces + veth + kernel UDP; switch on AF_PACKET ports (root)


class Target(enum.Enum):
    EMBEDDED = "embedded"   # netsum-switch + netsum-p4c output
    BMV2 = "bmv2"           # real simple_switch_grpc + real p4c output


class RigError(Exception):
    """A run could not be set up or carried out.  str() is the one line the user sees."""


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
        if self.leaves and (self.mode is not Mode.UDP or self.target is not Target.EMBEDDED):
            raise RigError("a tree (leaves >= 2) runs in mode udp on the embedded switch only")


def missing_bmv2_tools() -> list[str]:
    return [t for t in BMV2_TOOLS if shutil.which(t) is None]


def _free_ports(n: int, kind: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, kind) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def free_tcp_ports(n: int) -> list[int]:
    """n distinct loopback TCP ports free right now, for host all-reduce peers that must be
    named before they listen (a clash fails loudly: the worker cannot listen)."""
    return _free_ports(n, socket.SOCK_STREAM)


def free_udp_ports(n: int) -> list[int]:
    """n distinct loopback UDP ports free right now (all held open together, so none repeats).

    Only for ports that must be named before anything binds them: switch-to-switch links, whose
    two ends each name the other's port before either daemon starts, and benchmarks.  A clash
    in the window before the switch binds fails loudly at start.  Worker ports are asked for
    as `:0` and read back from the switch's ready line instead."""
    return _free_ports(n, socket.SOCK_DGRAM)


# `netsum-switch: ready: device N; <N@IFACE ...|no ports>; <P4Runtime on ADDR|P4Runtime off>`
_READY = re.compile(r"ready: device \S+; (.*); P4Runtime (?:on (\S+)|off)")
_UDP_PORT = re.compile(r"^(\d+)@udp:.*:(\d+)$")


@dataclass(frozen=True, slots=True)
class SwitchReady:
    """What a netsum-switch daemon says it opened: P4Runtime address, UDP port per port."""
    grpc_addr: str | None                 # None with --no-grpc
    udp_ports: dict[int, int]             # switch port number -> bound local UDP port


def parse_ready_line(text: str) -> SwitchReady | None:
    """The first ready line in `text` (a daemon's stdout or log), or None if there is none yet.
    The daemon prints bound ports, so a port asked for as `:0` shows its real number."""
    m = _READY.search(text)
    if m is None:
        return None
    udp: dict[int, int] = {}
    for iface in m.group(1).split():
        # `N@udp:HOST:PORT[,PEER]`: the local side is before the comma.
        u = _UDP_PORT.match(iface.partition(",")[0])
        if u:
            udp[int(u.group(1))] = int(u.group(2))
    addr = m.group(2)
    return SwitchReady(addr.rstrip(";") if addr else None, udp)


def wait_switch_ready(child: Child, timeout: float = 30.0) -> SwitchReady:
    """Poll a netsum-switch child's log for its ready line; RigError if it exits first or does
    not get ready within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = child.log_path.read_text(errors="replace") if child.log_path else ""
        ready = parse_ready_line(text)
        if ready is not None:
            return ready
        if not child.alive():
            raise RigError(f"the switch exited at start: {text.strip()[-500:]}")
        time.sleep(0.05)
    raise RigError(f"the switch did not become ready within {timeout:g} s")


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


class Rig:
    """One switch, its controller, and the jobs run through it.  Use as a context manager."""

    def __init__(self, config: RigConfig, say: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.say = say or (lambda _m: None)
        self.work_dir = config.work_dir
        self.procs = ProcessGroup(config.work_dir / "logs")
        self.lab: NetnsLab | None = None
        self.ctl: Controller | None = None
        self.layout = plan_layout(config.workers, config.leaves)
        self.switches: dict[str, Child] = {}
        self.udp_ports: dict[int, int] = {}      # worker rank -> its switch port's UDP port
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
    def __enter__(self) -> "Rig":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
                for h in self.layout.hosts:
                    sw = self.layout.switch(h.switch)
                    net = self.lab.add_host(h.rank + 1, h.mac, h.ipv4, SUBNET_PREFIX,
                                            arp={sw.service_ip: sw.service_mac})
                    ifaces[h.switch].append(f"{h.port}@{net.switch_if}")
            except NetnsError as exc:
                raise RigError(f"cannot set up namespaces: {exc}") from None
        else:
            for h in self.layout.hosts:
                ifaces[h.switch].append(f"{h.port}@udp:127.0.0.1:0")   # bound port: ready line
            # Switch-to-switch links: a UDP port on each side, each sending to the other.
            for sw in self.layout.switches:
                if sw.role != "leaf":
                    continue
                for port, peer, peer_port in sw.links:
                    a, b = free_udp_ports(2)
                    ifaces[sw.name].append(f"{port}@udp:127.0.0.1:{a},127.0.0.1:{b}")
                    ifaces[peer].append(f"{peer_port}@udp:127.0.0.1:{b},127.0.0.1:{a}")
        ready = {sw.name: self._start_switch(sw.name, ifaces[sw.name], json_path)
                 for sw in self.layout.switches}
        grpc: dict[str, str] = {}
        for name, r in ready.items():
            if r.grpc_addr is None:
                raise RigError(f"switch {name} started without P4Runtime")
            grpc[name] = r.grpc_addr
        if cfg.mode is Mode.UDP:
            for h in self.layout.hosts:
                try:
                    self.udp_ports[h.rank] = ready[h.switch].udp_ports[h.port]
                except KeyError:
                    raise RigError(f"switch {h.switch} did not report UDP port {h.port} in its "
                                   "ready line") from None
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
                    "-m", "switch"]
        argv = [*head, "--no-p4", "--device-id", "0",
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
                  algo: str = "ina") -> RunningJob:
        """Start one all-reduce of `inputs` (one tensor per worker, any float32 shape).
        `worker_args` go on every worker's `netsum-worker` command line (e.g. timing options).
        `algo`: "ina" through the switch; "ring" or "ps", the host baselines over TCP between
        the workers (workers.ring, workers.ps) on the same hosts, with no switch job: in mode
        netns their traffic crosses the switch as plain L2 forwarding, in mode udp (no
        namespaces) it goes straight over loopback."""
        cfg = self.config
        if algo not in ALGORITHMS:
            raise RigError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algo!r}")
        if len(inputs) != cfg.workers:
            raise RigError(f"{len(inputs)} tensors for {cfg.workers} workers")
        try:
            ref = reference(inputs, cfg.k)
        except (ValueError, WorkerError) as exc:
            raise RigError(f"bad input tensors: {exc}") from None
        blocks = quant.num_blocks(int(ref.total.size), cfg.k)
        if algo != "ina":
            return self._start_host_job(inputs, ref, blocks, algo, worker_args)
        slots = cfg.slots
        try:
            if self._next_slot + slots > POOL_SLOTS or self._next_job > MAX_JOB_ID:
                # A slot range is never reused by a later job (its registers keep the old
                # job's bitmaps and sets); when the pool or the job ids are used up, a fresh
                # pipeline clears every register and the controller's job table.
                self._push()
            job_id = self._next_job
            spec = JobSpec(job_id, tuple(h.name for h in self.layout.hosts), slots)
            self.controller.create_job(spec)
        except ControllerError as exc:
            raise RigError(f"controller: job {self._next_job}: {exc}") from None
        self._next_job += 1
        self._next_slot += slots
        ins, outs = self._write_inputs(job_id, inputs)
        started = time.monotonic()
        children = [self.procs.start(f"job{job_id}-w{rank}",
                                     [*self._worker_argv(job_id, rank, ins[rank], outs[rank]),
                                      *worker_args])
                    for rank in range(cfg.workers)]
        window = min(slots, blocks)
        leaves = sum(1 for sw in self.layout.switches if sw.role == "leaf")
        return RunningJob(self.counters, job_id, children, ref, ins, outs, blocks, window,
                          started, cfg.workers + leaves)

    def _write_inputs(self, job_id: int,
                      inputs: Sequence[np.ndarray]) -> tuple[list[Path], list[Path]]:
        job_dir = self.work_dir / f"job{job_id}-{int(time.time() * 1000) % 10**8}"
        job_dir.mkdir(parents=True)
        ins = [job_dir / f"in{rank}.npy" for rank in range(self.config.workers)]
        outs = [job_dir / f"out{rank}.npy" for rank in range(self.config.workers)]
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
        return job.wait(timeout=None, on_tick=tick, keep_results=keep_results)

    def _worker_argv(self, job_id: int, rank: int, in_path: Path, out_path: Path) -> list[str]:
        cfg = self.config
        argv = [str(self._bin / "netsum-worker"), "--job", str(job_id), "--workers",
                str(cfg.workers), "--slots", str(cfg.slots), "--k", str(cfg.k),
                "--input", str(in_path), "--output", str(out_path),
                "--timeout", str(cfg.timeout), "--json"]
        h = self.layout.hosts[rank]
        sw = self.layout.switch(h.switch)
        if cfg.mode is Mode.NETNS:
            assert self.lab is not None
            argv += ["--udp", sw.service_ip, "--bind", f"{h.ipv4}:{UDP_PORT}"]
            return self.lab.hosts[rank].exec_argv(argv)
        argv += ["--frames", f"127.0.0.1:{self.udp_ports[rank]}", "--mac", h.mac,
                 "--ip", h.ipv4, "--port", str(UDP_PORT), "--service-mac", sw.service_mac,
                 "--service-ip", sw.service_ip]
        return argv
