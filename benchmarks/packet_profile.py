"""Where a packet's CPU goes: one all-reduce through the rig under `perf record`, split by
process and by what ran (kernel, interpreter, numpy, the generated pipeline, the port loop).

    python benchmarks/packet_profile.py [--modes udp,shm] [--workers 4] [--k 256]
                                 [--elements 4194304] [--top 12]

For each mode one rig (netsum-switch daemon, the controller, --workers netsum-worker
processes starting together) all-reduces --elements float32 per worker; `perf record -a -e
cpu-clock` samples the whole machine meanwhile (root, or perf_event_paranoid <= 0: other
processes' samples are left out by command name), and each process's CPU time comes from
/proc.  Per process kind the table gives µs of CPU per packet (a worker's packets sent; the
switch's contributions received, the job's data_in) and how it splits: kernel (system calls,
loopback delivery, wake-ups), libpython (the interpreter), numpy, the generated pipeline
(nsw_*), the C port loop (nsio_*), libc and the rest; then the top leaf functions.  perf
sees C frames only: cProfile (vs_gloo.py --profile) names the Python functions.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from allreduce import cpu_seconds   # noqa: E402 - sibling benchmark script
from netsum.rig import Mode, Rig, RigConfig, RunningJob
from netsum.tensors import synthetic_inputs

COMMS = ("netsum-worker", "netsum-switch")
_LINE = re.compile(r"^\s*(\S+)\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")


def perf_usable() -> str | None:
    """None when `perf record -e cpu-clock` works here, else why not."""
    if shutil.which("perf") is None:
        return "no perf on PATH (Debian: linux-perf)"
    r = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-o", os.devnull, "true"],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else f"perf record fails: {r.stderr.strip()[:120]}"


def category(dso: str) -> str:
    name = os.path.basename(dso)
    if name.startswith("[kernel") or name == "[vdso]":
        return "kernel"
    for prefix, cat in (("libpython", "libpython"), ("_multiarray", "numpy"),
                        ("nsw_", "pipeline"), ("nsio_", "port loop"), ("libc.", "libc"),
                        ("_ctypes", "ctypes")):
        if name.startswith(prefix):
            return cat
    return "other"


def split(data: Path) -> dict[str, tuple[collections.Counter[str], collections.Counter[str]]]:
    """comm -> (samples per category, samples per leaf symbol)."""
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "comm,ip,sym,dso", "-G"],
                         capture_output=True, text=True, check=True).stdout
    res: dict[str, tuple[collections.Counter[str], collections.Counter[str]]] = {}
    for line in out.splitlines():
        m = _LINE.match(line)
        if not m or m.group(1) not in COMMS:
            continue
        cats, syms = res.setdefault(m.group(1), (collections.Counter(), collections.Counter()))
        cat = category(m.group(3))
        cats[cat] += 1
        syms[f"{m.group(2) or '?'} [{cat}]"] += 1
    return res


def profile_mode(mode: Mode, workers: int, k: int, elements: int, work: Path,
                 data: Path) -> tuple[float, float, int, int, float]:
    """(workers' CPU s, switch CPU s, packets sent, contributions in, slowest elapsed s)."""
    with Rig(RigConfig(work, workers=workers, k=k, mode=mode, timeout=60)) as rig:
        assert rig.switch is not None
        rig.run_job(synthetic_inputs(workers, (1000,), seed=2))       # modules built, warm
        sw_pid = rig.switch.popen.pid
        lead = 6.0      # seconds for every worker to start up on a loaded machine
        job = rig.start_job(synthetic_inputs(workers, (elements,), seed=1),
                            worker_args=["--start-at", f"{time.time() + lead:.3f}"])
        time.sleep(lead - 0.3)
        # Start-up (imports, reading the input) is over by now: only the all-reduce counts.
        w0 = {c.popen.pid: cpu_seconds(c.popen.pid) or 0.0 for c in job.children}
        sw0 = cpu_seconds(sw_pid) or 0.0
        perf = subprocess.Popen(["perf", "record", "-q", "-a", "-e", "cpu-clock", "-F", "1999",
                                 "-o", str(data)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        last: dict[int, float] = {}

        def sample(j: RunningJob) -> None:
            for c in j.children:
                v = cpu_seconds(c.popen.pid)
                if v is not None:
                    last[c.popen.pid] = v - w0[c.popen.pid]
            last[-1] = (cpu_seconds(sw_pid) or sw0) - sw0
        out = job.wait(on_tick=sample, tick=0.1)
        perf.send_signal(2)
        perf.wait(30)
        counters = rig.counters(job.job_id)
    wcpu = sum(v for p, v in last.items() if p >= 0)
    return (wcpu, last.get(-1, 0.0), sum(w.packets_sent for w in out.workers),
            int(counters.get("data_in", 0)), max(w.elapsed_s for w in out.workers))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default="udp,shm")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--elements", type=int, default=1 << 22)
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    why = perf_usable()
    if why:
        print(f"packet_profile: skipped, {why}")     # (make bench runs every script)
        return 0
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {a.workers} "
          f"workers, K={a.k}, {a.elements} elements each")
    with tempfile.TemporaryDirectory(prefix="netsum-profile-") as tmp:
        for mode in (Mode(m) for m in a.modes.split(",")):
            data = Path(tmp) / f"{mode.value}.data"
            wcpu, scpu, packets, contribs, wall = profile_mode(
                mode, a.workers, a.k, a.elements, Path(tmp) / mode.value, data)
            res = split(data)
            print(f"\n== {mode.value}: {wall:.2f} s, {a.elements / wall / 1e6:.2f} M elem/s; "
                  f"{packets} packets sent, {contribs} contributions in")
            for comm, cpu, per in (("netsum-worker", wcpu, packets),
                                   ("netsum-switch", scpu, contribs)):
                cats, syms = res.get(comm, (collections.Counter(), collections.Counter()))
                total = sum(cats.values()) or 1
                us = 1e6 * cpu / max(per, 1)
                parts = "  ".join(f"{c} {us * n / total:.1f}" for c, n in cats.most_common())
                print(f"  {comm}: {us:.1f} µs CPU per packet = {parts}")
                for sym, n in syms.most_common(a.top):
                    print(f"      {100 * n / total:5.1f}%  {sym}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
