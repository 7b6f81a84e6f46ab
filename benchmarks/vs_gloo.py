"""netsum all-reduce next to torch.distributed gloo: same machine, same run, same harness.

    python benchmarks/vs_gloo.py [--ranks 2,4,8] [--sizes 1,16,256,4096,65536,1048576,16777216]
                                 [--kinds gloo,udp,shm] [--k 256[,1024]] [--seconds 1.5]
                                 [--png PATH] [--csv PATH]

For each rank count n and each kind, n rank processes are started once and all-reduce every
size in turn (float32, SUM); the kinds of one n run one after the other, so they share the
machine's load of that minute:
  * gloo: `torch.distributed.all_reduce` on a gloo group (TCP on 127.0.0.1);
  * udp: `netsum.workers.Worker.allreduce` in each rank, Ethernet frames over UDP-tunnel ports
    of a netsum-switch daemon (the C port loop where it builds), job set up by the controller
    (netsum.rig: P4Runtime, the real netsum.p4 at K);
  * shm: the same over shared-memory ports (`-i N@shm:PATH`, netsum.workers.shmring);
    `shm@N` spins N µs before sleeping on a ring (NETSUM_SHM_SPIN_US for the switch and the
    ranks), so several spins can be compared in one run;
  * KIND/py (udp/py, shm/py, ...): the same with the ranks on the Python worker core
    (NETSUM_WORKER_NATIVE=0); without /py they use the compiled one (workers/native.py)
    where it builds, so `udp,udp/py` compares the two in one run;
  * KIND/pyio (udp/pyio, shm/pyio): the compiled core with the transports' receive and send
    loops in Python (NETSUM_WORKER_CIO=0, workers/cio.py), before/after the C I/O loops;
  * KIND/all (udp/all, shm/all): every due timer of the ranks fires on its own
    (Timing.hold_timers off), before/after the held timers (docs/performance.md, 17);
  * KIND/spec (udp/spec, shm/spec, ...): each call's block exponents predicted from the
    previous call's maxima of the same size (speculative exponents, docs/quantization.md):
    no bootstrap round when they hit, as in a loop over tensors whose blocks keep their
    binade (the same tensor here: every prediction hits);
  * backend: `torch.distributed.all_reduce` on the "netsum" backend (netsum.training: the
    lane engine, one lane with the whole window, as `udp` has) over the same UDP-tunnel
    ports: the difference to `udp` is what the training path adds per call;
  * lanes: the training lanes' engine alone (netsum.training.lanes.LaneEngine, no torch)
    over the same FrameTransport and job as `udp` (with --profile, its driver thread's
    profile over the whole run).
Every call is preceded by one multiprocessing barrier for all kinds alike; a call's latency is
from the moment the last rank entered it to the moment the last rank had its result (the
clock is CLOCK_MONOTONIC, shared by the processes), so the barrier's own wake-up skew is not
counted for any kind.  Each size runs 2 warm-up calls (1 from 1M elements on), then as
many as fit in --seconds (at least 3, at most 50); the median is shown.  Goodput is
elements / latency; the ratio is netsum's latency over gloo's (< 1: netsum faster).  Every kind's last result is checked:
netsum's against the float64 sum within the documented quantization bound
(netsum.tensors), gloo's within float32 rounding.
CPU accounting (the profile's first cut, docs/performance.md): each rank's process CPU
over the timed calls and, for netsum, the switch daemon's, per packet each rank sent.
Emulation capacity: the summed worker goodput at n=4, K, largest size (n x 32 bit x
elements / latency: the data all workers push through the emulated network per second).
--k 256,1024: every netsum kind once per K in the same run, labelled "KIND K=k" (K > 256 is
beyond a Tofino-class switch's per-packet capacity: an emulation lever, docs/protocol.md).
--profile SIZE: rank 0 of each netsum kind runs its timed calls of that size under cProfile
(CPU clock) and prints where its time goes; --limits: benchmarks/limits.py's bare C forward
loops in the same run.
"""
from __future__ import annotations

import argparse
import cProfile
import csv
import io
import math
import multiprocessing as mp
import os
import pstats
import re
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from allreduce import cpu_seconds, prepare_native   # noqa: E402 - sibling benchmark script
from netsum.shmring import spin_seconds
from netsum.tensors import check_result, reference, synthetic_inputs

SIZES = (1, 16, 256, 4096, 65536, 1 << 20, 1 << 24)
SPIN_ENV = "NETSUM_SHM_SPIN_US"
#: a kind ending in it runs its ranks on the Python worker core (NETSUM_WORKER_NATIVE=0)
PY = "/py"
#: a kind ending in it runs the compiled core with the I/O loops in Python (NETSUM_WORKER_CIO=0)
PYIO = "/pyio"
#: a kind ending in it runs its ranks with every timer on its own (Timing.hold_timers off)
ALL = "/all"
#: a kind ending in it predicts each call's exponents from the previous call's maxima of the
#: same size (speculative exponents, slack 0: what a loop over tensors whose blocks keep their
#: binade gets; the first warm-up call of each size has no prediction)
SPEC = "/spec"


def _base(kind: str) -> str:
    """The kind without its /py, /pyio, /all or /spec."""
    return kind.removesuffix(SPEC).removesuffix(ALL).removesuffix(PY).removesuffix(PYIO)


def _direct(kind: str) -> bool:
    """Do this kind's ranks drive netsum.workers' cores themselves (a switch pid known)?"""
    kind = _base(kind.split(" K=")[0])
    return kind in ("udp", "lanes") or kind.startswith("shm")
KINDS = ("gloo", "udp", "shm", "backend", "lanes")
WARMUP = 2
BIG = 1 << 20           # from this size on one warm-up call (they take seconds)
MIN_REPS, MAX_REPS = 3, 50
CHECK_MAX = 1 << 20     # elements checked against the reference (a prefix of larger tensors)


@dataclass(frozen=True, slots=True)
class NetsumPlan:
    """What a netsum rank needs to open its transport and join the job."""
    kind: str                           # "udp" | "shm" | "shm@SPIN_US"
    job_id: int
    slots: int
    k: int
    links: tuple[tuple[str, str], ...]  # per rank: (switch port: "HOST:PORT" | shm path, bind)
    hosts: tuple[tuple[str, str], ...]  # per rank: (MAC, IPv4)
    service: tuple[str, str]            # the switch's service (MAC, IPv4)
    switch_pid: int
    lanes: str = ""                     # "lanes" kind: "-", or what its profile is of


@dataclass(slots=True)
class Point:
    kind: str
    ranks: int
    elements: int
    latency: float = math.nan            # median, s
    p10: float = math.nan
    p90: float = math.nan
    reps: int = 0
    ok: bool = False
    problem: str = ""
    rank_cpu_us: float = math.nan        # all ranks' CPU per call, µs
    switch_cpu_us: float = math.nan      # the switch daemon's CPU per call, µs
    packets: float = math.nan            # packets each rank sent per call (netsum)
    retx: int = 0
    spurious: int = 0

    @property
    def goodput(self) -> float:
        return self.elements / self.latency if self.latency > 0 else math.nan


@dataclass(slots=True)
class _RankRow:
    rank: int
    size: int
    t0: list[float] = field(default_factory=list)
    t1: list[float] = field(default_factory=list)
    cpu: float = 0.0
    switch_cpu: float = 0.0
    packets: int = 0
    retx: int = 0
    spurious: int = 0
    ok: bool = True
    problem: str = ""


def rank_input(rank: int, size: int) -> np.ndarray:
    """Rank `rank`'s tensor: netsum.tensors' synthetic values, a seed per rank (so a rank
    makes only its own; rank 0 remakes all of them for the check)."""
    return synthetic_inputs(1, (size,), seed=1000 + rank)[0]


# -- the per-rank operations ---------------------------------------------------------------
def _gloo_op(rank: int, n: int, port: int, backend: str = "gloo") -> tuple[Any, Any]:
    import torch
    import torch.distributed as dist
    if backend == "netsum":
        import netsum.training.backend  # noqa: F401 - registers the backend
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=n)
    cache: dict[int, tuple[Any, Any]] = {}

    def op(x: np.ndarray) -> np.ndarray:
        # One tensor per size, refilled before the call (outside nothing: the copy is
        # part of the call for both kinds, as netsum's allreduce reads its input too).
        src, t = cache.get(x.size) or cache.setdefault(x.size, (torch.from_numpy(x),
                                                                  torch.empty(x.size)))
        t.copy_(src)
        dist.all_reduce(t)
        return t.numpy()

    def close() -> None:
        dist.destroy_process_group()
    return op, close


def _netsum_op(rank: int, n: int, plan: NetsumPlan) -> tuple[Any, Any]:
    from netsum.wire import UDP_PORT
    from netsum.workers import JobConfig, Timing, Worker
    from netsum.workers.wire import Endpoint
    link, bind = plan.links[rank]
    local = Endpoint.parse(plan.hosts[rank][0], plan.hosts[rank][1], UDP_PORT)
    service = Endpoint.parse(plan.service[0], plan.service[1], UDP_PORT)
    transport: Any
    if plan.kind.startswith("shm"):
        from netsum.workers.shmring import ShmFrameTransport
        transport = ShmFrameTransport(link, local, service, k=plan.k)
    else:
        from netsum.workers.transport import FrameTransport, parse_hostport
        transport = FrameTransport(parse_hostport(link), local, service, parse_hostport(bind),
                                   k=plan.k)
    job = JobConfig(plan.job_id, n, plan.slots, plan.k)
    timing = Timing(progress_deadline=30.0, hold_timers=ALL not in plan.kind)
    stats = {"packets": 0, "retx": 0, "spurious": 0, "misses": 0}
    if plan.lanes:
        return _lanes_op(transport, job, timing, stats, plan.lanes)
    worker = Worker(transport, job, timing, speculate=plan.kind.endswith(SPEC))
    outs: dict[int, np.ndarray] = {}

    def op(x: np.ndarray) -> np.ndarray:
        # One output per size, filled in place, as gloo's op keeps one tensor per size.
        buf = outs.get(x.size)
        if buf is None:
            buf = outs[x.size] = np.empty(x.size, dtype=np.float32)
        res = worker.allreduce(x, out=buf)
        stats["misses"] += getattr(res.stats, "misses", 0)
        stats["packets"] += res.stats.packets_sent
        stats["retx"] += res.stats.retransmissions
        stats["spurious"] += getattr(res.stats, "spurious", 0)
        return res.tensor

    op.stats = stats  # type: ignore[attr-defined]
    return op, transport.close


def _lanes_op(transport: Any, job: Any, timing: Any, stats: dict[str, int],
              profile: str) -> tuple[Any, Any]:
    """The training lanes' engine (netsum.training.lanes, no torch) over the same transport
    and job; with a profile, its driver thread runs under cProfile (printed at close)."""
    from netsum.training.lanes import LaneEngine, LaneSpec
    prof = cProfile.Profile(time.thread_time) if profile != "-" else None
    if prof is not None:
        original = LaneEngine._loop

        def loop(self: Any) -> None:
            prof.enable()
            try:
                original(self)
            finally:
                prof.disable()
        LaneEngine._loop = loop  # type: ignore[method-assign]
    engine = LaneEngine(transport, [LaneSpec(job)], timing)

    def op(x: np.ndarray) -> np.ndarray:
        res = engine.submit(x).result()
        st = engine.stats[-1]
        stats["packets"] += st.packets_sent
        stats["retx"] += st.retransmissions
        return res.tensor

    def close() -> None:
        engine.close()
        if prof is not None:
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(int(os.environ.get("VS_GLOO_PROFILE_ROWS", "18")))
            print(f"lanes driver thread, {profile}:\n{text.getvalue()}", flush=True)
    op.stats = stats  # type: ignore[attr-defined]
    return op, close


def _check(kind: str, n: int, k: int, size: int, y: np.ndarray) -> tuple[bool, str]:
    m = min(size, CHECK_MAX)
    xs = [rank_input(r, size)[:m] for r in range(n)]
    if kind == "gloo":
        total = np.sum([x.astype(np.float64) for x in xs], axis=0)
        tol = 1e-5 * np.sum([np.abs(x.astype(np.float64)) for x in xs], axis=0) + 1e-30
        bad = np.abs(y[:m].astype(np.float64) - total) > tol
        return (not bad.any()), ("" if not bad.any() else
                                 f"element {int(np.flatnonzero(bad)[0])} off")
    v = check_result(np.ascontiguousarray(y[:m]), reference(xs, k))
    return v.ok, v.problem


def _rank_main(kind: str, rank: int, n: int, k: int, plan: Any, sizes: list[int],
               seconds: float, barrier: Any, reps_box: Any, out: Any, profile: int = 0) -> None:
    try:
        if kind == "backend":
            port, envs = plan
            os.environ.update(envs[rank])
            op, close = _gloo_op(rank, n, port, "netsum")
        else:
            op, close = _gloo_op(rank, n, plan) if kind == "gloo" else \
                _netsum_op(rank, n, plan)
    except Exception as exc:  # noqa: BLE001 - reported by the parent in one line
        out.put(("error", rank, f"{type(exc).__name__}: {exc}"))
        barrier.abort()
        return
    stats = getattr(op, "stats", None)
    try:
        for size in sizes:
            x = rank_input(rank, size)
            row = _RankRow(rank, size)
            warm = []
            for _ in range(WARMUP if size < BIG else 1):
                barrier.wait()
                t0 = time.monotonic()
                op(x)
                warm.append(time.monotonic() - t0)
            if rank == 0:
                reps_box.value = max(MIN_REPS, min(MAX_REPS, int(seconds / max(min(warm),
                                                                                1e-6))))
            barrier.wait()
            reps = reps_box.value
            p0 = (stats["packets"], stats["retx"], stats.get("spurious", 0)) if stats \
                else (0, 0, 0)
            sw0 = cpu_seconds(plan.switch_pid) if _direct(kind) and rank == 0 else None
            prof = cProfile.Profile(time.process_time) if (
                rank == 0 and size == profile and _direct(kind)) else None
            c0 = time.process_time()
            y = x
            for _ in range(reps):
                barrier.wait()
                if prof is not None:
                    prof.enable()
                t0 = time.monotonic()
                y = op(x)
                row.t1.append(time.monotonic())
                row.t0.append(t0)
                if prof is not None:
                    prof.disable()
            row.cpu = time.process_time() - c0
            if prof is not None:
                text = io.StringIO()
                pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(int(os.environ.get("VS_GLOO_PROFILE_ROWS", "18")))
                out.put(("profile", rank, f"{kind} n={n} size={size}, {reps} calls:\n"
                         + text.getvalue()))
            if sw0 is not None:
                row.switch_cpu = (cpu_seconds(plan.switch_pid) or sw0) - sw0
            if stats:
                row.packets = stats["packets"] - p0[0]
                row.retx = stats["retx"] - p0[1]
                row.spurious = stats.get("spurious", 0) - p0[2]
            if rank == 0:
                row.ok, row.problem = _check(kind, n, k, size, y)
            out.put(("row", rank, row))
    except Exception as exc:  # noqa: BLE001
        out.put(("error", rank, f"{type(exc).__name__}: {exc}"))
        barrier.abort()
    finally:
        close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(kind: str, n: int, plan: Any, sizes: list[int], seconds: float,
              k: int, profile: int = 0) -> list[Point]:
    ctx = mp.get_context("spawn")
    barrier, reps_box, out = ctx.Barrier(n), ctx.Value("i", 0), ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(kind, r, n, k, plan, sizes, seconds,
                                                  barrier, reps_box, out, profile), daemon=True)
             for r in range(n)]
    for p in procs:
        p.start()
    rows: dict[int, list[_RankRow]] = {s: [] for s in sizes}
    errors: list[str] = []
    want = n * len(sizes)
    got = 0
    try:
        while got < want and not errors:
            try:
                msg = out.get(timeout=5)
            except Exception:  # noqa: BLE001 - queue.Empty: are they still alive?
                if not any(p.is_alive() for p in procs):
                    errors.append("every rank exited early")
                continue
            if msg[0] == "error":
                errors.append(f"rank {msg[1]}: {msg[2]}")
            elif msg[0] == "profile":
                print(msg[2], flush=True)
            else:
                rows[msg[2].size].append(msg[2])
                got += 1
    finally:
        for p in procs:
            p.join(30 if not errors else 2)
            if p.is_alive():
                p.kill()
    points = []
    for size in sizes:
        pt = Point(kind, n, size)
        rs = rows[size]
        if len(rs) != n:
            pt.problem = "; ".join(errors) or "missing ranks"
            points.append(pt)
            continue
        reps = len(rs[0].t0)
        lat = [max(r.t1[i] for r in rs) - max(r.t0[i] for r in rs) for i in range(reps)]
        q = statistics.quantiles(lat, n=10) if reps >= 2 else [lat[0]] * 9
        r0 = next(r for r in rs if r.rank == 0)
        pt.latency, pt.p10, pt.p90, pt.reps = statistics.median(lat), q[0], q[-1], reps
        pt.ok, pt.problem = r0.ok, r0.problem
        pt.rank_cpu_us = sum(r.cpu for r in rs) / reps * 1e6
        if _direct(kind):
            pt.switch_cpu_us = r0.switch_cpu / reps * 1e6
            pt.packets = sum(r.packets for r in rs) / n / reps
            pt.retx = sum(r.retx for r in rs)
            pt.spurious = sum(r.spurious for r in rs)
        points.append(pt)
    return points


# -- the switch --------------------------------------------------------------------------------
def netsum_points(kind: str, n: int, k: int, sizes: list[int], seconds: float,
                  work: Path, profile: int = 0) -> list[Point]:
    from netsum.rig import Mode
    from netsum.workers.cio import ENV as CIO_ENV
    from netsum.workers.native import ENV as NATIVE_ENV
    mode = Mode.SHM if kind.startswith("shm") else Mode.UDP
    spin = _base(kind).partition("@")[2]
    bare = kind.removesuffix(SPEC).removesuffix(ALL)
    env = {SPIN_ENV: spin or None, NATIVE_ENV: "0" if bare.endswith(PY) else None,
           CIO_ENV: "0" if bare.endswith(PYIO) else None}
    old = {name: os.environ.get(name) for name in env}
    for name, value in env.items():     # the switch and the spawned ranks inherit them
        if value is not None:
            os.environ[name] = value
    try:
        return _netsum_points(kind, mode, n, k, sizes, seconds, work, profile)
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _netsum_points(kind: str, mode: Any, n: int, k: int, sizes: list[int], seconds: float,
                   work: Path, profile: int) -> list[Point]:
    from netsum.controller.topology import JobSpec
    from netsum.rig import Mode, Rig, RigConfig
    with Rig(RigConfig(work / f"{re.sub('[@/]', '-', kind)}-{n}-k{k}", workers=n, k=k, mode=mode,
                       timeout=30)) as rig:
        assert rig.switch is not None
        hosts = rig.layout.hosts
        sw = rig.layout.switches[0]
        job_id, slots = 1, rig.config.slots
        rig.controller.create_job(JobSpec(job_id, tuple(h.name for h in hosts), slots))
        if mode is not Mode.SHM:
            links = tuple((f"127.0.0.1:{rig.udp_ports[h.rank]}",
                           f"{rig.peers[h.name][0]}:{rig.peers[h.name][1]}") for h in hosts)
        else:
            links = tuple((rig.shm_paths[h.name], "") for h in hosts)
        lanes = "" if _base(kind) != "lanes" else (f"n={n} size={profile}" if profile else "-")
        plan = NetsumPlan(kind, job_id, slots, k, links, tuple((h.mac, h.ipv4) for h in hosts),
                          (sw.service_mac, sw.service_ip), rig.switch.popen.pid, lanes)
        return run_ranks(kind, n, plan, sizes, seconds, k, profile)


def backend_points(n: int, k: int, sizes: list[int], seconds: float, work: Path,
                   profile: int) -> list[Point]:
    """The "netsum" torch.distributed backend: its rank 0 registers the job itself."""
    from netsum.rig import Mode, Rig, RigConfig
    with Rig(RigConfig(work / f"backend-{n}", workers=n, k=k, mode=Mode.UDP, timeout=30)) as rig:
        rig.detach_controller()
        envs = []
        for h in rig.layout.hosts:
            host, bind = rig.peers[h.name]
            envs.append({"NETSUM_TOPOLOGY": str(rig.topology_path), "NETSUM_HOST": h.name,
                         "NETSUM_FRAMES": f"127.0.0.1:{rig.udp_ports[h.rank]}",
                         "NETSUM_FRAMES_BIND": f"{host}:{bind}", "NETSUM_LANES": "1",
                         "NETSUM_SLOTS": str(rig.config.slots), "NETSUM_TIMEOUT": "30"})
        return run_ranks("backend", n, (_free_port(), envs), sizes, seconds, k, profile)


def points_for(kind: str, n: int, k: int, sizes: list[int], seconds: float,
               work: Path, profile: int = 0) -> list[Point]:
    if kind == "gloo":
        return run_ranks(kind, n, _free_port(), sizes, seconds, k)
    if kind == "backend":
        return backend_points(n, k, sizes, seconds, work, profile)
    return netsum_points(kind, n, k, sizes, seconds, work, profile)


# -- output ------------------------------------------------------------------------------------
def _fmt_t(s: float) -> str:
    if math.isnan(s):
        return "-"
    return f"{s * 1e3:.3f}" if s < 0.01 else f"{s * 1e3:.1f}"


def print_table(points: list[Point], kinds: list[str]) -> None:
    by = {(p.kind, p.ranks, p.elements): p for p in points}
    nets = [k for k in kinds if k != "gloo"]
    head = f"{'ranks':>5} {'elements':>9} " + " ".join(f"{k + ' ms':>10}" for k in kinds)
    head += " " + " ".join(f"{k + '/gloo':>9}" for k in nets if "gloo" in kinds)
    head += " " + " ".join(f"{k + ' M/s':>9}" for k in kinds)
    print(head)
    for n in sorted({p.ranks for p in points}):
        for size in sorted({p.elements for p in points if p.ranks == n}):
            pts = [by.get((k, n, size)) for k in kinds]
            line = f"{n:>5} {size:>9} " + " ".join(
                f"{_fmt_t(p.latency) if p else '-':>10}" for p in pts)
            g = by.get(("gloo", n, size))
            if g is not None:
                for k in nets:
                    p = by.get((k, n, size))
                    r = p.latency / g.latency if p and g.latency > 0 else math.nan
                    line += f" {r:>9.2f}"
            line += " " + " ".join(f"{(p.goodput / 1e6 if p else math.nan):>9.3f}" for p in pts)
            bad = [f"{p.kind}: {p.problem or 'CHECK FAILED'}" for p in pts if p and not p.ok]
            print(line + ("   " + "; ".join(bad) if bad else ""))


def print_cpu(points: list[Point]) -> None:
    print("\nCPU per call (µs; all ranks together / the switch daemon), and per packet a rank "
          "sent (netsum):")
    for p in points:
        if not p.ok:
            continue
        line = f"  {p.kind:>7} n={p.ranks} {p.elements:>9}: ranks {p.rank_cpu_us:10.0f}"
        if _direct(p.kind) and not math.isnan(p.packets):
            per = p.packets * p.ranks
            line += (f"  switch {p.switch_cpu_us:9.0f}  packets/rank {p.packets:8.1f}  per "
                     f"packet: ranks {p.rank_cpu_us / per:6.1f}  switch "
                     f"{p.switch_cpu_us / per:5.1f}  retx {p.retx} ({p.spurious} spurious)")
        print(line)


def print_capacity(points: list[Point], k: int) -> None:
    """`k`: the K of kinds without a " K=k" label (one K in the run)."""
    for p in points:
        if p.kind == "gloo" or p.ranks != 4 or not p.ok:
            continue
        if p.elements != max(q.elements for q in points if q.kind == p.kind and q.ranks == 4):
            continue
        gbps = p.ranks * 32 * p.goodput / 1e9
        kk = p.kind.split(" K=")[1] if " K=" in p.kind else k
        print(f"emulation capacity ({p.kind}, n=4, K={kk}, {p.elements} elements): "
              f"{gbps:.3f} Gb/s summed ({gbps / 4 * 1e3:.0f} Mb/s per worker)")


def write_csv(points: list[Point], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "ranks", "elements", "latency_s", "p10_s", "p90_s", "reps",
                    "goodput_elem_s", "ok", "rank_cpu_us", "switch_cpu_us", "packets", "retx",
                    "spurious"])
        for p in points:
            w.writerow([p.kind, p.ranks, p.elements, p.latency, p.p10, p.p90, p.reps,
                        p.goodput, p.ok, p.rank_cpu_us, p.switch_cpu_us, p.packets, p.retx,
                        p.spurious])


def write_png(points: list[Point], kinds: list[str], path: Path, dpi: int = 110) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ranks = sorted({p.ranks for p in points})
    fig, axes = plt.subplots(2, len(ranks), figsize=(4.6 * len(ranks), 7.5), squeeze=False,
                             sharex=True)
    by = {(p.kind, p.ranks, p.elements): p for p in points}
    for col, n in enumerate(ranks):
        top, bot = axes[0][col], axes[1][col]
        for kind in kinds:
            pts = sorted((p for p in points if p.kind == kind and p.ranks == n),
                         key=lambda p: p.elements)
            xs = [p.elements for p in pts if not math.isnan(p.latency)]
            color = f"C{kinds.index(kind)}"      # one colour per kind in both rows
            top.plot(xs, [p.latency * 1e3 for p in pts if not math.isnan(p.latency)], "o-",
                     label=kind, color=color)
            if kind != "gloo":
                rs = [(p.elements, p.latency / by[("gloo", n, p.elements)].latency)
                      for p in pts if ("gloo", n, p.elements) in by and not math.isnan(p.latency)]
                if rs:
                    bot.plot(*zip(*rs), "o-", label=f"{kind} / gloo", color=color)
        top.set_xscale("log")
        top.set_yscale("log")
        top.set_title(f"{n} ranks")
        top.set_ylabel("all-reduce latency (ms, median)")
        top.grid(True, which="both", alpha=0.3)
        top.legend()
        for y, style in ((1.0, "-"), (2.0, "--")):
            bot.axhline(y, color="grey", linestyle=style, linewidth=0.8)
        bot.set_xscale("log")
        bot.set_yscale("log")
        bot.set_xlabel("float32 elements per rank")
        # no legend of its own: it would cover the curves, and the colours are the top's
        bot.set_ylabel("netsum time / gloo time (colours as above)")
        bot.grid(True, which="both", alpha=0.3)
    # one rank count is a narrow figure: the title on two lines so it is not cut at the edges
    sep = "\n" if len(ranks) == 1 else ", "
    fig.suptitle(f"netsum vs torch.distributed gloo{sep}same machine, same run")
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--kinds", default="gloo,udp,shm")
    ap.add_argument("--k", default="256", help="values per packet; a list (256,1024) runs "
                    "every netsum kind once per K")
    ap.add_argument("--seconds", type=float, default=1.5, help="timed calls per point (s)")
    ap.add_argument("--png", type=Path, default=Path("results/vs_gloo.png"))
    ap.add_argument("--csv", type=Path, default=Path("results/vs_gloo.csv"))
    ap.add_argument("--profile", type=int, default=0, metavar="SIZE",
                    help="cProfile rank 0 of each netsum kind at this size")
    ap.add_argument("--limits", action="store_true",
                    help="also the bare C forward loops (benchmarks/limits.py)")
    a = ap.parse_args()
    ks = [int(x) for x in a.k.split(",") if x]
    from netsum.wire import K_SUPPORTED
    if not ks or any(k not in K_SUPPORTED for k in ks):
        ap.error(f"--k: one or more of {', '.join(map(str, K_SUPPORTED))}")
    ranks = [int(x) for x in a.ranks.split(",")]
    sizes = [int(x) for x in a.sizes.split(",")]
    kinds = [x for x in a.kinds.split(",") if x]
    if not all(k in KINDS or re.fullmatch(r"(udp|shm(@\d+)?|lanes)(/py|/pyio)?(/all)?(/spec)?",
                                          k) for k in kinds):
        ap.error(f"--kinds: one or more of {', '.join(KINDS)}, shm@SPIN_US, and udp, shm, "
                 "shm@SPIN_US or lanes with /py (the Python worker core) or /pyio (the "
                 "I/O loops in Python), /all (every timer on its own), /spec (exponents "
                 "predicted from the previous call)")
    if any(k != "gloo" for k in kinds) and not prepare_native(ks):
        print("the native switch backend is not available: netsum runs on the Python path",
              file=sys.stderr)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; K={a.k}; "
          f"{a.seconds:g} s per point")
    points: list[Point] = []
    # (label, kind, K): gloo once; each netsum kind once per K, labelled with it when several
    runs = [(kind if kind == "gloo" or len(ks) == 1 else f"{kind} K={k}", kind, k)
            for kind in kinds for k in (ks[:1] if kind == "gloo" else ks)]
    with tempfile.TemporaryDirectory(prefix="netsum-vsgloo-") as tmp:
        for n in ranks:
            for label, kind, k in runs:
                t = time.monotonic()
                pts = points_for(kind, n, k, sizes, a.seconds, Path(tmp), a.profile)
                for p in pts:
                    p.kind = label
                points += pts
                print(f"  {label} n={n}: {time.monotonic() - t:.0f} s, load "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
    kinds = [label for label, _, _ in runs]
    print()
    print_table(points, kinds)
    print_cpu(points)
    print()
    print_capacity(points, ks[0])
    if a.limits:
        import limits
        for k in ks:
            print()
            limits.print_limits(limits.run_all(2.0, 4, k, int(spin_seconds() * 1e6)), k)
    a.png.parent.mkdir(parents=True, exist_ok=True)
    write_png(points, kinds, a.png)
    write_csv(points, a.csv)
    print(f"\n{a.png}, {a.csv}")
    return 0 if all(p.ok for p in points) else 1


if __name__ == "__main__":
    sys.exit(main())
