"""One netsum job in a hostile network, for the data-plane fuzz test and the soak benchmark:
a netsum-switch daemon (UDP-tunnel ports: one per worker plus a rogue host's, a topology host
that is in no job), set up by netsum-ctl, N netsum-worker processes each behind a relay of
tests/impair.py (loss, duplication, reordering as asked), frames injected into the ports while
the job runs, and every RESULT the switch sends checked against the sums the inputs give
(tests/exactsums.py).

Test plumbing: it starts real processes and real sockets, and knows nothing of the switch's
or the workers' code beyond their command lines.
"""
from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from dpfuzz import FuzzTarget, Fuzzed, Host
from exactsums import ResultCheck, dequantized, expected_sums
from helpers import BIN, SwitchDaemon, built_netsum, free_udp_ports, switch_stats
from impair import ImpairedNet
from netsum.procs import Child, ProcessGroup
from netsum.tensors import synthetic_inputs

__all__ = ["Impairment", "JobRun", "HostileSwitch"]

SERVICE_MAC, SERVICE_IP = "02:00:00:00:01:00", "10.0.0.254"
JOB = 7


def _mac(rank: int) -> str:
    return f"02:00:00:00:00:{rank + 1:02x}"


def _ip(rank: int) -> str:
    return f"10.0.0.{rank + 1}"


@dataclass(frozen=True, slots=True)
class Impairment:
    loss: float = 0.0
    dup: float = 0.0
    window: int = 1          # 1: every datagram leaves in order, at once


@dataclass
class JobRun:
    """What one job did: worker JSON rows, the relay's totals, the RESULT check."""
    outputs_exact: bool
    workers: list[dict[str, object]]
    relay: dict[str, int]
    check: ResultCheck
    seconds: float
    injected: int = 0
    returncodes: list[int] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    written: list[int] = field(default_factory=list)    # ranks that wrote an output
    wrong: list[int] = field(default_factory=list)      # ... that is not the exact sum


class HostileSwitch:
    """The switch, its topology and the rogue port; `run_job` runs one job after another on
    job JOB (a new registration each time: `netsum-ctl job reset`)."""

    def __init__(self, work: Path, procs: ProcessGroup, workers: int = 4, k: int = 32,
                 slots: int = 32) -> None:
        self.work, self.procs, self.n, self.k, self.slots = work, procs, workers, k, slots
        self.p4info, self.json_path = built_netsum(k)
        self.peers = free_udp_ports(workers + 1)          # the last: the rogue host's address
        self.daemon = SwitchDaemon(procs, [f"{i + 1}@udp:127.0.0.1:0=127.0.0.1:{p}"
                                           for i, p in enumerate(self.peers)])
        self.topo = work / "topo.yaml"
        self.rogue: socket.socket | None = None
        self.rogue_received: list[bytes] = []
        self.jobs_run = 0
        self._election = 1
        self.ended = 0.0                         # when the last job's workers had all exited
        self.controller: Child | None = None     # `netsum-ctl run`, when start(watch=True)
        self.check: ResultCheck | None = None    # the running job's
        self.children: list[Child] = []          # the running job's workers

    @property
    def switch(self) -> Child:
        assert self.daemon.child is not None
        return self.daemon.child

    def target(self) -> FuzzTarget:
        return FuzzTarget(JOB, self.slots, self.k, Host(bytes.fromhex(SERVICE_MAC.replace(
            ":", "")), socket.inet_aton(SERVICE_IP)), tuple(
            Host(bytes.fromhex(_mac(r).replace(":", "")), socket.inet_aton(_ip(r)))
            for r in range(self.n)))

    def start(self, watch: bool = False, stuck_after: float | None = None) -> None:
        """Start the switch and set it up: with `watch`, by a `netsum-ctl run` that stays
        (and restores the switch when it restarts, and reclaims a job stuck for `stuck_after`
        seconds), else by one `netsum-ctl setup`."""
        ready = self.daemon.start()
        self.switch_ports = [ready.udp_ports[i + 1] for i in range(self.n + 1)]
        hosts = [{"name": f"h{r + 1}", "mac": _mac(r), "ipv4": _ip(r), "switch": "s1",
                  "port": r + 1} for r in range(self.n + 1)]
        self.topo.write_text(yaml.safe_dump({
            "switches": [{"name": "s1", "grpc_addr": self.daemon.grpc_addr, "device_id": 0,
                          "ports": list(range(1, self.n + 2)),
                          "service": {"mac": SERVICE_MAC, "ipv4": SERVICE_IP}, "slots": 1024}],
            "hosts": hosts,
            "jobs": [{"id": JOB, "workers": [f"h{r + 1}" for r in range(self.n)],
                      "slots": self.slots}]}))
        if watch:
            self.run_controller(stuck_after=stuck_after)
        else:
            self.ctl("setup", str(self.json_path))
        self.rogue = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rogue.bind(("127.0.0.1", self.peers[self.n]))
        self.rogue.setblocking(False)

    def run_controller(self, attach: bool = False, timeout: float = 60.0,
                       stuck_after: float | None = None) -> float:
        """Start `netsum-ctl run [--attach]`; seconds until it says it is running."""
        started = time.monotonic()
        stuck = ["--stuck-after", str(stuck_after)] if stuck_after is not None else []
        self.controller = self.procs.start("ctl", [
            str(BIN / "netsum-ctl"), "--timeout", "30", "--topo", str(self.topo), "--p4info",
            str(self.p4info), "run", *(["--attach"] if attach else []), "--interval", "0.2",
            *stuck, str(self.json_path)])
        self.wait_controller("controller running", timeout)
        return time.monotonic() - started

    def wait_controller(self, text: str, timeout: float = 60.0) -> str:
        """The first line of the controller's output containing `text`, waiting for it."""
        assert self.controller is not None and self.controller.log_path is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.controller.log_path.read_text(errors="replace").splitlines():
                if text in line:
                    return line
            if not self.controller.alive():
                raise AssertionError(f"netsum-ctl run exited: {self.controller.log_tail(10)}")
            time.sleep(0.05)
        raise AssertionError(f"netsum-ctl run did not say {text!r} within {timeout:g} s")

    def ctl(self, *args: str) -> str:
        # One election id above the watching controller's (0,1): each call is primary for
        # its moment, and the watcher is primary again when it disconnects.
        self._election += 1
        r = subprocess.run([str(BIN / "netsum-ctl"), "--json", "--timeout", "30",
                            "--election-id", f"0,{self._election}", "--topo",
                            str(self.topo), "--p4info", str(self.p4info), *args],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"netsum-ctl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def job_counters(self) -> dict[str, int]:
        rows = json.loads(self.ctl("stats"))
        return {k: int(v) for k, v in next(r for r in rows if r["job"] == JOB).items()
                if isinstance(v, int)}

    def stats(self) -> dict[str, object]:
        return switch_stats(self.daemon.grpc_addr)

    def drain_rogue(self) -> None:
        assert self.rogue is not None
        for _ in range(64):
            try:
                self.rogue_received.append(self.rogue.recv(65535))
            except BlockingIOError:
                return

    def run_job(self, blocks: int, seed: int, impair: Impairment = Impairment(),
                fuzz: Sequence[Fuzzed] = (), worker_timeout: float = 60.0,
                on_tick: Callable[[], None] | None = None, reset: bool = True) -> JobRun:
        """One all-reduce of `blocks` blocks per worker; `fuzz` is injected spread over the
        job, a share of it after each datagram a worker sends (so all of it arrives while the
        job runs, whatever the machine's speed).  A job after the first is a new registration
        (`job reset`), unless `reset` is false (the caller registered it)."""
        if self.jobs_run and reset:
            self.ctl("job", "reset", str(JOB))
        self.jobs_run += 1
        xs = synthetic_inputs(self.n, (blocks * self.k,), seed=seed)
        agreed, sums = expected_sums(xs, self.k)
        check = self.check = ResultCheck(sums, self.slots, self.k)
        uses = self.n * (blocks + self.slots)      # DATA a worker sends at least, all ranks
        share = -(-len(fuzz) // uses) if fuzz else 0
        queue = list(reversed(fuzz))
        workers = free_udp_ports(self.n)
        job_dir = self.work / f"job{self.jobs_run}"
        job_dir.mkdir()
        injected = 0

        def inject(_link: int) -> None:
            nonlocal injected
            for _ in range(min(share, len(queue))):
                f = queue.pop()
                if f.link == self.n:
                    assert self.rogue is not None
                    self.rogue.sendto(f.frame, ("127.0.0.1", self.switch_ports[self.n]))
                else:
                    net.send_up(f.link, f.frame)
                injected += 1
            if injected % 256 < share:
                self.drain_rogue()

        def checked(frame: bytes) -> None:
            # Frames the switch forwards by L2 (fuzz frames that are no netsum traffic) go
            # down the links too; only what comes from the service address is the job's.
            if len(frame) >= 58 and frame[12:14] == b"\x08\x00" and frame[26:30] == service:
                check(frame)

        service = socket.inet_aton(SERVICE_IP)
        started = time.monotonic()
        with ImpairedNet(self.switch_ports[:self.n], self.peers[:self.n], workers,
                         seed=seed, loss=impair.loss, dup=impair.dup, window=impair.window,
                         check=checked, on_up=inject if fuzz else None) as net:
            children = self.children = []
            for rank in range(self.n):
                src = job_dir / f"in{rank}.npy"
                np.save(src, xs[rank])
                host, port = net.worker_side[rank]
                children.append(self.procs.start(f"job{self.jobs_run}-w{rank}", [
                    str(BIN / "netsum-worker"), "--job", str(JOB), "--workers", str(self.n),
                    "--slots", str(self.slots), "--k", str(self.k), "--frames",
                    f"{host}:{port}", "--bind", f"127.0.0.1:{workers[rank]}", "--mac",
                    _mac(rank), "--ip", _ip(rank), "--service-mac", SERVICE_MAC,
                    "--service-ip", SERVICE_IP, "--input", str(src), "--output",
                    str(job_dir / f"out{rank}.npy"), "--timeout", str(worker_timeout),
                    "--json"]))
            while any(c.popen.poll() is None for c in children):
                if on_tick is not None:
                    on_tick()       # may kill and restart things, the switch too
                if not self.switch.alive():
                    raise AssertionError(f"the switch died: {self.switch.log_tail(10)}")
                time.sleep(0.05)
            relay = net.totals()
        assert not net.errors, net.errors
        self.ended = time.monotonic()
        seconds = self.ended - started
        self.drain_rogue()
        logs = [c.log_path.read_text() if c.log_path else "" for c in children]
        codes = [int(c.popen.returncode) for c in children]
        rows = [json.loads(next(ln for ln in log.splitlines() if ln.startswith("{")))
                for log, code in zip(logs, codes) if code == 0]
        truth = dequantized(agreed, sums, self.n)
        exact = all(code == 0 for code in codes) and all(
            np.array_equal(np.load(job_dir / f"out{r}.npy"), truth) for r in range(self.n))
        # A worker that failed must not have written a result; one that wrote, the exact one.
        written = [r for r in range(self.n) if (job_dir / f"out{r}.npy").exists()]
        wrong = [r for r in written
                 if not np.array_equal(np.load(job_dir / f"out{r}.npy"), truth)]
        return JobRun(exact, rows, relay, check, seconds, injected, codes, logs, written, wrong)

