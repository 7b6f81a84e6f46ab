"""All-reduce goodput through the embedded switch, next to the ceiling of a bare Python loop.

    python benchmarks/allreduce.py [--elements N] [--workers 2,4,8] [--k 32,64,128,256]
                                   [--mode udp,netns] [--seconds S] [--repeat N] [--profile]
                                   [--png PATH] [--scaling 1,4,16,64,256]
                                   [--switch-path native,python] [--switch-io c,python]

Measured side by side in one run on the same cores:
  * goodput: tensor elements per second of one all-reduce (SwitchML's figure): N real
    netsum-worker processes through a netsum-switch daemon configured by the controller
    (netsum.rig), elements / the slowest worker's allreduce time (process start-up excluded;
    with --start together, the default, all workers begin at one instant, so the first one's
    time does not include waiting for the others' start-up);
  * ceiling: a bare recv->send Python loop (one process, the frames of the same size over the
    same kind of UDP sockets on 127.0.0.1) reflecting N closed-loop senders' frames.  A
    completed slot costs the switch n frames in and n out, which the bare loop does as n
    forwards, so the loop's forwards per second F imply at most F * K / n elements/s.
CPU columns: the switch daemon's and all workers' CPU time (from /proc, worker start-up
included) as a share of the wall time, and per contribution the switch received (a contribution
in costs the switch one frame in and, on average, one out; a worker one frame out and one in).
Each point is the median of --repeat runs.  --profile runs the switch daemon under cProfile for
the 4-worker case at the largest K and prints where its time goes.  --scaling MB,MB,... measures
4 workers at the largest K for tensors of those sizes (MB of float32 per worker) and prints the
switch daemon's peak RSS for each (no per-tensor cost may hide in the set-up: goodput should be
flat above 4 MB).  --switch-path: the switch daemon's packet path, native (netsum/switch/native, the
default where it builds; its module is compiled before the first run) and/or python, each
point measured for each path in turn.  --switch-io: the daemon's port loop with the native
path, c (netsum/switch/native/io.py: recvmmsg/sendmmsg around the native pipeline, the default) and/or
python (NETSUM_NATIVE_IO=0), also measured in turn for each point.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import pstats
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from netsum.rig import Mode, Rig, RigConfig, RigError, RunningJob
from netsum.tensors import synthetic_inputs
from netsum.wire import K_HARDWARE_MAX, K_SUPPORTED, packet_bytes

WINDOW = 64   # frames in flight per bare-loop sender (like a worker's window)


@dataclass(frozen=True, slots=True)
class Row:
    workers: int
    k: int
    goodput: float          # elements/s (slowest worker)
    mean_worker: float      # elements/s averaged over workers
    retx: int
    ok: bool
    switch_cpu: float       # CPU seconds of the switch daemon during the job
    workers_cpu: float      # CPU seconds of all workers together
    wall: float             # the slowest worker's allreduce time
    packets_in: int         # contributions the switch received (job counter data_in)
    forwards: float         # bare loop forwards/s with the same number of senders
    ceiling: float          # forwards * k / workers

    @property
    def ratio(self) -> float:
        return self.goodput / self.ceiling if self.ceiling else float("nan")


# -- the bare loop ---------------------------------------------------------------------------
def _reflector(port_q: Any, stop: Any) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.2)
    port_q.put(s.getsockname()[1])
    buf = bytearray(2048)
    view = memoryview(buf)
    recv, send = s.recvfrom_into, s.sendto
    while not stop.is_set():
        try:
            n, addr = recv(buf)
        except socket.timeout:
            continue
        send(view[:n], addr)


def _sender(port: int, size: int, seconds: float, out: Any) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.05)
    frame = bytes(size)
    dest = ("127.0.0.1", port)
    for _ in range(WINDOW):
        s.sendto(frame, dest)
    got = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            s.recv(2048)
        except socket.timeout:
            s.sendto(frame, dest)   # a lost frame: keep the window full
            continue
        got += 1
        s.sendto(frame, dest)
    out.put(got)


def bare_forwards(senders: int, k: int, seconds: float) -> float:
    """Frames per second a one-process Python recv->send loop reflects for `senders`."""
    ctx = mp.get_context("spawn")
    port_q, out, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    refl = ctx.Process(target=_reflector, args=(port_q, stop), daemon=True)
    refl.start()
    try:
        port = port_q.get(timeout=20)
        procs = [ctx.Process(target=_sender, args=(port, packet_bytes(k), seconds, out),
                             daemon=True) for _ in range(senders)]
        for p in procs:
            p.start()
        total = sum(out.get(timeout=seconds + 30) for _ in procs)
        for p in procs:
            p.join()
    finally:
        stop.set()
        refl.join(5)
        if refl.is_alive():
            refl.kill()
    return total / seconds


# -- the all-reduce --------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process (Linux /proc), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Run:
    goodput: float
    mean: float
    retx: int
    ok: bool
    switch_cpu: float
    workers_cpu: float
    wall: float
    packets_in: int
    switch_rss: int = 0     # peak resident set of the switch daemon (bytes, VmHWM)


def peak_rss(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


#: With --start together, every worker waits for the same wall-clock instant (netsum-worker
#: --start-at) this long after the rig starts them: enough for all of them to import and read
#: their inputs on 2 busy cores (a worker that misses it starts at once, as with --start asap).
START_LEAD_S = 3.0


def allreduce_run(work: Path, workers: int, k: int, elements: int, mode: Mode,
                  profile: Path | None = None, together: bool = True) -> Run:
    cfg = RigConfig(work, workers=workers, k=k, mode=mode, slots=256, timeout=20,
                    switch_profile=profile)
    inputs = synthetic_inputs(workers, (elements,), seed=k + workers)
    # Started one by one, the first worker's all-reduce also waits for the last one's start-up
    # (0.1-0.2 s here): a fixed cost per call that is the launcher's, not the data path's.
    start = ["--start-at", f"{time.time() + START_LEAD_S:.3f}"] if together else []
    with Rig(cfg) as rig:
        assert rig.switch is not None
        sw_pid = rig.switch.popen.pid
        sw0 = cpu_seconds(sw_pid) or 0.0
        last: dict[int, float] = {}

        def sample(job: RunningJob) -> None:
            # Sampled while alive: an exited (reaped) worker's /proc entry is gone.
            for c in job.children:
                v = cpu_seconds(c.popen.pid)
                if v is not None:
                    last[c.popen.pid] = v
            last[-1] = (cpu_seconds(sw_pid) or sw0) - sw0
            last[-2] = float(peak_rss(sw_pid) or last.get(-2, 0))

        out = rig.start_job(inputs, worker_args=start).wait(on_tick=sample, tick=0.1)
    slowest = max(w.elapsed_s for w in out.workers)
    mean = sum(w.goodput for w in out.workers) / workers
    retx = sum(w.retransmissions for w in out.workers)
    if not out.ok:
        print(f"  !! {workers} workers K={k}: " + "; ".join(w.error for w in out.workers
                                                          if not w.ok), file=sys.stderr)
    return Run(elements / slowest, mean, retx, out.ok, last.get(-1, float("nan")),
               sum(v for p, v in last.items() if p >= 0), slowest,
               out.switch_counters.get("data_in", 0), int(last.get(-2, 0)))


def print_profile(path: Path, top: int = 18) -> None:
    st = pstats.Stats(str(path))
    total = st.total_tt  # type: ignore[attr-defined]
    by_file: dict[str, float] = {}
    for (file, _line, _fn), (_cc, _nc, tt, _ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        key = file.replace(str(ROOT) + "/", "")
        if "site-packages" in key or key.startswith("<") or "/lib/python" in key:
            key = "grpc/protobuf/stdlib/builtins" if "site-packages" in key or \
                "/lib/python" in key else key
        by_file[key] = by_file.get(key, 0.0) + tt
    print(f"\nswitch daemon profile: {total:.2f} s of CPU in the "
          "profiled thread; own time by module:")
    for key, tt in sorted(by_file.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {100 * tt / total:5.1f}%  {key}")
    print("\ntop functions by own time:")
    st.sort_stats("tottime").print_stats(top)


def write_png(rows: list[Row], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, color in ((32, "tab:blue"), (64, "tab:orange"), (128, "tab:green"),
                     (256, "tab:red")):
        sel = [r for r in rows if r.k == k]
        if not sel:
            continue
        xs = [r.workers for r in sel]
        ax.plot(xs, [r.goodput / 1e6 for r in sel], "o-", color=color, label=f"netsum K={k}")
        ax.plot(xs, [r.ceiling / 1e6 for r in sel], "s--", color=color, alpha=0.6,
                label=f"bare-loop ceiling K={k}")
    ax.set_xlabel("workers")
    ax.set_ylabel("M elements/s")
    ax.set_xticks(sorted({r.workers for r in rows}))
    ax.legend()
    ax.set_title("all-reduce goodput through the embedded switch")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda r: r.goodput)[len(runs) // 2]


def prepare_native(ks: list[int]) -> bool:
    """Compile netsum.p4's native module for each K into the cache the daemon reads, so no
    run starts on the Python path while the compiler works; False (with why) if not here."""
    import json as _json

    from netsum import build
    from netsum.switch.pipeline import Pipeline
    for k in ks:
        t0 = time.monotonic()
        pl = Pipeline(_json.loads(build.ensure_built(k)[0].read_bytes()), native=True)
        if pl.native is None:
            print(f"native backend unavailable at K={k}: {pl.native_status}", file=sys.stderr)
            return False
        print(f"native module for K={k} ready ({time.monotonic() - t0:.1f} s)")
    from netsum.switch.native import io as nio
    from netsum.switch.native.build import IO_CFLAGS, build_module
    build_module(nio.source(), IO_CFLAGS, "nsio")       # the C port loop, into the cache too
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, default=1 << 20, help="tensor elements (1M)")
    ap.add_argument("--workers", default="2,4,8")
    ap.add_argument("--k", default=",".join(str(k) for k in K_SUPPORTED if k <= K_HARDWARE_MAX),
                    help="values per packet, a comma list (default: every K up to 256)")
    ap.add_argument("--mode", default="udp", help="udp, netns or both (udp,netns)")
    ap.add_argument("--seconds", type=float, default=2.0, help="bare-loop run length")
    ap.add_argument("--repeat", type=int, default=3, help="runs per point (the median is shown)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--png", type=Path)
    ap.add_argument("--scaling", help="tensor sizes in MB per worker, e.g. 1,4,16,64,256")
    ap.add_argument("--switch-path", default="native",
                    help="native, python or both (native,python): the daemon's packet path")
    ap.add_argument("--switch-io", default="c",
                    help="c, python or both (c,python): the daemon's port loop (native path)")
    ap.add_argument("--start", choices=("together", "asap"), default="together",
                    help="together: the workers begin their all-reduce at one instant (the "
                         "goodput of the data path); asap: each as soon as it has started "
                         "(the first one's time then includes the others' start-up)")
    a = ap.parse_args()
    together = a.start == "together"
    paths = [x for x in a.switch_path.split(",") if x]
    if not paths or any(x not in ("native", "python") for x in paths):
        ap.error(f"--switch-path: native and/or python, got {a.switch_path!r}")
    ios = [x for x in a.switch_io.split(",") if x]
    if not ios or any(x not in ("c", "python") for x in ios):
        ap.error(f"--switch-io: c and/or python, got {a.switch_io!r}")
    ns = [int(x) for x in a.workers.split(",")]
    ks = [int(x) for x in a.k.split(",")]
    modes = [Mode(m) for m in a.mode.split(",")]
    rows: list[Row] = []
    print(f"all-reduce of {a.elements} float32 elements; ceiling from a bare recv->send loop "
          f"over UDP on 127.0.0.1 ({a.seconds:g} s per point); medians of {a.repeat} runs; "
          f"workers start {a.start}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if "native" in paths and not prepare_native([int(x) for x in a.k.split(",")]):
        paths.remove("native")
        if not paths:
            return 1
    # (label, NETSUM_NATIVE, NETSUM_NATIVE_IO) per measured variant of the switch daemon
    variants = [(f"{p}/{io}" if p == "native" else p, p == "native", io == "c")
                for p in paths for io in (ios if p == "native" else ["python"])]
    print(f"{'path':>9} {'mode':>5} {'workers':>7} {'K':>3} {'goodput':>12} {'per-worker':>12} "
          f"{'retx':>6} {'bare fwd/s':>11} {'ceiling':>12} {'ratio':>6} {'cpu: switch':>11} "
          f"{'workers':>7} {'us/pkt: switch':>14} {'worker':>6}  ok")
    with tempfile.TemporaryDirectory(prefix="netsum-bench-") as tmp:
        for mode in modes:
            for k in ks:
                for n in ns:
                    fwd = bare_forwards(n, k, a.seconds)
                    for path, native, cio in variants:
                        # the daemon inherits the choice; =1 loads the module compiled above
                        os.environ["NETSUM_NATIVE"] = "1" if native else "0"
                        os.environ["NETSUM_NATIVE_IO"] = "1" if cio else "0"
                        tag = path.replace("/", "")
                        try:
                            runs = [allreduce_run(Path(tmp) / f"{tag}{mode.value}n{n}k{k}r{i}", n,
                                                  k, a.elements, mode, together=together)
                                    for i in range(a.repeat)]
                        except RigError as exc:
                            print(f"error: {exc}", file=sys.stderr)
                            return 1
                        b = _median_run(runs)
                        r = Row(n, k, b.goodput, b.mean, b.retx, all(x.ok for x in runs),
                                b.switch_cpu, b.workers_cpu, b.wall, b.packets_in, fwd, fwd * k / n)
                        rows.append(r)
                        print(f"{path:>9} {mode.value:>5} {n:7d} {k:3d} {r.goodput / 1e6:9.3f} M/s "
                              f"{r.mean_worker / 1e6:9.3f} M/s "
                              f"{r.retx:6d} {fwd:11,.0f} {r.ceiling / 1e6:9.3f} M/s {r.ratio:6.2f} "
                              f"{100 * r.switch_cpu / r.wall:9.0f} % "
                              f"{100 * r.workers_cpu / r.wall:5.0f} %"
                              f" {1e6 * r.switch_cpu / max(1, r.packets_in):14.1f}"
                              f" {1e6 * r.workers_cpu / max(1, r.packets_in):6.1f}"
                              f"  {'yes' if r.ok else 'NO'}", flush=True)
        os.environ["NETSUM_NATIVE"] = "1" if variants[0][1] else "0"
        os.environ["NETSUM_NATIVE_IO"] = "1" if variants[0][2] else "0"
        if a.scaling:
            k = max(ks)
            print(f"\nscaling: 4 workers, K={k}, mode {modes[0].value}, {variants[0][0]} switch")
            print(f"{'MB/worker':>9} {'elements':>11} {'goodput':>12} {'switch RSS':>11}  ok")
            for mb in (float(x) for x in a.scaling.split(",")):
                el = int(mb * 2**20 / 4)
                sr = allreduce_run(Path(tmp) / f"scale{mb:g}", 4, k, el, modes[0],
                                   together=together)
                print(f"{mb:9g} {el:11d} {sr.goodput / 1e6:9.3f} M/s "
                      f"{sr.switch_rss / 2**20:8.0f} MB  {'yes' if sr.ok else 'NO'}", flush=True)
        if a.profile:
            prof = Path(tmp) / "switch.prof"
            allreduce_run(Path(tmp) / "profiled", 4, max(ks), a.elements, modes[0], profile=prof,
                          together=together)
            print_profile(prof)
    if a.png:
        write_png(rows, a.png)
        print(f"wrote {a.png}")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
