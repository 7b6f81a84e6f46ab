"""`netsum-worker`: run one worker of one aggregation job.

Kernel UDP (inside a namespace / Mininet host):
    netsum-worker --job 1 --workers 4 --slots 256 --udp 10.0.0.254 --bind 10.0.0.1 \\
        --size 1000000 --rank 0 --check
Unprivileged frames over UDP to an embedded switch port:
    netsum-worker --job 1 --workers 2 --slots 64 --frames 127.0.0.1:9001 --bind 127.0.0.1:40001 \\
        --mac 02:00:00:00:00:01 --ip 10.0.0.1 --service-mac 02:00:00:00:00:fe \\
        --service-ip 10.0.0.254 --size 100000 --rank 0 --check
The same frames over a shared-memory port of the switch (`-i N@shm:PATH`, one machine):
    netsum-worker ... --shm /run/netsum/p1.sock --mac ... --ip ... --service-mac ... --service-ip ...
Host baselines (no switch): ring all-reduce or parameter server over TCP between the workers:
    netsum-worker --algo ring --job 1 --workers 3 --peers 10.0.0.1,10.0.0.2,10.0.0.3 \\
        --rank 0 --size 1000000 --check

Data: `--input file.npy`, or synthetic (`--size`, `--seed`, `--rank`: rank r's tensor is
deterministic, so `--check` can recompute every rank's tensor and verify the sum against the
documented bound).  Errors are reported in one line; exit status 0 ok, 1 failure or check
mismatch, 2 bad usage.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from netsum.wire import K_DEFAULT, K_SUPPORTED, MAX_WORKERS, UDP_PORT
from netsum.workers import hostcli, quant, wire
from netsum.workers.api import Worker
from netsum.workers.core import AllreduceResult, JobConfig, Timing
from netsum.workers.errors import WorkerError
from netsum.workers.ring import HostResult
from netsum.workers.shmring import ShmFrameTransport
from netsum.workers.transport import FrameTransport, Transport, UdpTransport, parse_hostport

__all__ = ["main", "build_parser", "synthetic", "load_npy", "MAX_ELEMENTS"]


class UsageError(Exception):
    pass


def synthetic(seed: int, rank: int, size: int) -> np.ndarray:
    """Rank `rank`'s test tensor: normal values of a rank-dependent magnitude, some zeros."""
    rng = np.random.default_rng([seed, rank])
    x = rng.standard_normal(size) * 10.0 ** rng.uniform(-2, 2)
    x[rng.random(size) < 0.05] = 0.0
    return x.astype(np.float32)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="netsum-worker", description="Run one netsum worker.")
    job = p.add_argument_group("job (as configured on the switch by netsum-ctl)")
    job.add_argument("--job", type=int, required=True, help="job id")
    job.add_argument("--workers", type=int, required=True,
                     help=f"workers in the job (1..{MAX_WORKERS})")
    job.add_argument("--slots", type=int,
                     help="slots of the job's range to use (the window); needed by --algo ina")
    job.add_argument("--k", type=int, default=K_DEFAULT, choices=K_SUPPORTED,
                     help="values per packet (the P4 build's NETSUM_K)")
    tr = p.add_argument_group("transport (exactly one)")
    tr.add_argument("--udp", metavar="SERVICE_IP[:PORT]",
                    help="kernel UDP to the aggregation service")
    tr.add_argument("--frames", metavar="HOST:PORT",
                    help="Ethernet frames over UDP to a netsum-switch udp port")
    tr.add_argument("--shm", metavar="PATH",
                    help="Ethernet frames over the shared-memory rings of a netsum-switch shm "
                         "port (its socket PATH)")
    tr.add_argument("--bind", metavar="IP[:PORT]",
                    help=f"local address (udp: default 0.0.0.0:{UDP_PORT}; frames: the switch "
                         "port's fixed peer, default 127.0.0.1:0)")
    tr.add_argument("--mac", help="frames/shm: this worker's MAC")
    tr.add_argument("--ip", help="frames: this worker's IPv4 (part of its member key)")
    tr.add_argument("--port", type=int, default=UDP_PORT, help="frames: this worker's UDP port")
    tr.add_argument("--service-mac", help="frames: the switch's service MAC")
    tr.add_argument("--service-ip", help="frames: the switch's service IPv4")
    data = p.add_argument_group("data")
    data.add_argument("--input", type=Path, help=".npy float tensor to sum")
    data.add_argument("--size", type=int, help="synthetic tensor length")
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--rank", type=int, default=None,
                      help="this worker's rank in the job (default 0): picks the synthetic "
                           "tensor, and names this worker in errors")
    data.add_argument("--check", action="store_true", help="synthetic: verify the sum of all ranks")
    data.add_argument("--output", type=Path, help="write the sum (.npy)")
    run = p.add_argument_group("run")
    run.add_argument("--iterations", type=int, default=1)
    run.add_argument("--timeout", type=float, default=10.0,
                     help="seconds without progress before failing")
    run.add_argument("--rto", type=float, default=0.05, help="initial retransmission timeout (s)")
    run.add_argument("--rto-min", type=float, default=None,
                     help="floor of the retransmission timeout (s; default min(--rto, 0.005))")
    run.add_argument("--fast-retransmit", type=int, default=3, metavar="N",
                     help="resend the oldest unanswered packet once N later results came back "
                          "(0: timers only)")
    run.add_argument("--window-min", type=int, default=16, metavar="N",
                     help="floor of the congestion window after loss (slot uses)")
    run.add_argument("--fixed-window", action="store_true",
                     help="send the whole window at once (no congestion window)")
    run.add_argument("--all-timers", action="store_true",
                     help="every due timer fires on its own, also while results come in "
                          "(default: held; one probe per doubling interval of silence)")
    run.add_argument("--speculate", action="store_true",
                     help="from the second iteration on, predict the blocks' exponents from "
                          "the previous one's (one round trip a call when they hold; every "
                          "worker of the job must say it too)")
    run.add_argument("--json", action="store_true", help="one JSON object per iteration")
    run.add_argument("--start-at", type=float, metavar="UNIX_TIME",
                     help="wait until this wall-clock time before the first all-reduce (so "
                          "that workers started one by one begin together)")
    run.add_argument("--latencies", type=Path, metavar="FILE",
                     help="write the last iteration's per-chunk latencies (s, .npy)")
    hostcli.add_arguments(p)
    return p


def _transport(a: argparse.Namespace) -> Transport:
    if sum(bool(x) for x in (a.udp, a.frames, a.shm)) != 1:
        raise UsageError("give exactly one of --udp, --frames and --shm")
    try:
        if a.udp:
            service = parse_hostport(a.udp, UDP_PORT)
            bind = parse_hostport(a.bind, UDP_PORT) if a.bind else ("0.0.0.0", UDP_PORT)
            return UdpTransport(service, bind, k=a.k)
        missing = [n for n in ("mac", "ip", "service_mac", "service_ip") if not getattr(a, n)]
        if missing:
            raise UsageError(f"--{'frames' if a.frames else 'shm'} needs " + ", ".join(
                "--" + m.replace("_", "-") for m in missing))
        local = wire.Endpoint.parse(a.mac, a.ip, a.port)
        service_ep = wire.Endpoint.parse(a.service_mac, a.service_ip, UDP_PORT)
        if a.shm:
            return ShmFrameTransport(a.shm, local, service_ep, k=a.k)
        switch = parse_hostport(a.frames)
        bind = parse_hostport(a.bind, 0) if a.bind else ("127.0.0.1", 0)
        return FrameTransport(switch, local, service_ep, bind, k=a.k)
    except (ValueError, wire.WireError) as exc:
        raise UsageError(str(exc)) from None


def _tensor(a: argparse.Namespace) -> np.ndarray:
    if (a.input is None) == (a.size is None):
        raise UsageError("give exactly one of --input and --size")
    if a.input is not None:
        return load_npy(a.input)
    if a.size < 1:
        raise UsageError("--size must be at least 1")
    if not 0 <= a.rank < a.workers:
        raise UsageError(f"--rank must be in 0..{a.workers - 1}")
    return synthetic(a.seed, a.rank, a.size)


#: The most elements one call carries: the v2 header's `length` and `offset` are 32 bits.
MAX_ELEMENTS = (1 << 32) - 1
#: The largest .npy header read (numpy's own default guard against a hostile header).
_MAX_HEADER = 10_000


def load_npy(path: Path) -> np.ndarray:
    """A .npy tensor, its header checked before anything is allocated: a header that claims
    more data than the file holds, more elements than the protocol carries, or a dtype that
    is not numbers is a one-line UsageError (never a MemoryError from a hostile file)."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _fortran, dtype = np.lib.format.read_array_header_1_0(
                    f, max_header_size=_MAX_HEADER)
            elif version in ((2, 0), (3, 0)):
                shape, _fortran, dtype = np.lib.format.read_array_header_2_0(
                    f, max_header_size=_MAX_HEADER)
            else:
                raise ValueError(f"unsupported .npy format version {version}")
            at = f.tell()
            f.seek(0, 2)
            available = f.tell() - at
    except (OSError, ValueError, SyntaxError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"{path}: cannot load a .npy array: {first}") from None
    if dtype.hasobject or dtype.kind not in "fiub":
        raise UsageError(f"{path}: dtype {dtype} is not a number type")
    count = 1
    for n in shape:
        count *= int(n)
    if count > MAX_ELEMENTS:
        raise UsageError(f"{path}: {count} elements; one call carries at most {MAX_ELEMENTS} "
                         "(the header's 32-bit length)")
    if count * dtype.itemsize != available:
        raise UsageError(f"{path}: the header says {shape} {dtype} ({count * dtype.itemsize} "
                         f"bytes) but the file holds {available} bytes of data")
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot load a .npy array: {exc}") from None


def _check(a: argparse.Namespace, res: AllreduceResult | HostResult) -> bool:
    """Every rank's synthetic tensor is recomputed here, so the expectation comes from the
    inputs alone: the float64 sum, the agreed exponents (max of every rank's proposal) and the
    documented bound for them.  Nothing the switch returned widens it."""
    xs = [synthetic(a.seed, r, a.size) for r in range(a.workers)]
    true = np.sum([x.astype(np.float64) for x in xs], axis=0)
    agreed = quant.agreed_exponents(xs, a.k)
    if not np.array_equal(res.exponents, agreed):
        return False
    bound = quant.error_bound(agreed, a.workers, a.k, a.size)
    err = np.abs(res.tensor.astype(np.float64) - true)
    return bool((err <= bound + np.abs(true) * 2.0**-24 + 2.0**-150).all())


def _report(a: argparse.Namespace, it: int, res: AllreduceResult, ok: bool | None,
            late: float = 0.0, syscalls: str | None = None) -> str:
    st = res.stats
    p50, p99 = st.latency_percentiles()
    rate = res.tensor.size / st.elapsed if st.elapsed > 0 else float("inf")
    row = dict(iteration=it, job=a.job, elements=int(res.tensor.size), elapsed_s=st.elapsed,
               elements_per_s=rate, packets_sent=st.packets_sent,
               retransmissions=st.retransmissions,
               fast_retransmissions=st.fast_retransmissions, spurious=st.spurious,
               duplicates=st.duplicates, stale=st.stale,
               rejected=st.rejected, chunk_latency_p50_ms=p50 * 1e3,
               chunk_latency_p99_ms=p99 * 1e3, start_late_s=late, check=ok,
               syscalls=syscalls)   # the transport's datagram calls (workers/mmsg.py)
    if a.json:
        return json.dumps(row)
    check = "" if ok is None else ("  check ok" if ok else "  CHECK FAILED")
    return (f"iteration {it}: {row['elements']} elements in {st.elapsed:.3f}s "
            f"({rate / 1e6:.2f} M elem/s), {st.packets_sent} packets, {st.retransmissions} "
            f"retransmissions, chunk latency p50 {p50 * 1e3:.2f} ms p99 {p99 * 1e3:.2f} ms{check}")


def run(a: argparse.Namespace) -> int:
    # --rank given names this worker in errors; synthetic data defaults to rank 0's tensor
    a.rank_given = a.rank
    if a.rank is None:
        a.rank = 0
    if a.check and a.size is None:
        raise UsageError("--check needs synthetic data (--size)")
    if a.iterations < 1:
        raise UsageError("--iterations must be at least 1")
    if a.algo != "ina":
        try:
            host_job = hostcli.host_job(a)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return hostcli.run_host(a, host_job, _tensor(a),
                                (lambda r: _check(a, r)) if a.check else None)
    if a.slots is None:
        raise UsageError("--algo ina needs --slots")
    try:
        job = JobConfig(a.job, a.workers, a.slots, a.k)
        timing = Timing(rto_initial=a.rto,
                        rto_min=min(a.rto, 0.005) if a.rto_min is None else a.rto_min,
                        progress_deadline=a.timeout, adaptive=not a.fixed_window,
                        fast_retransmit=a.fast_retransmit, window_min=a.window_min,
                        hold_timers=not a.all_timers)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    tensor = _tensor(a)
    status = 0
    transport = _transport(a)
    try:
        # a rank given names this worker in errors (the switch's REJECT of its DATA)
        worker = Worker(transport, job, timing,
                        rank=a.rank_given if a.rank_given is not None and
                        0 <= a.rank_given < a.workers else None, speculate=a.speculate)
        late = hostcli.wait_until(a.start_at)
        for it in range(a.iterations):
            res = worker.allreduce(tensor)
            ok = _check(a, res) if a.check else None
            print(_report(a, it, res, ok, late, getattr(transport, "syscalls", None)),
                  flush=True)
            if ok is False:
                status = 1
        if a.output is not None:
            np.save(a.output, res.tensor)
        if a.latencies is not None:
            np.save(a.latencies, res.stats.latencies)
    finally:
        transport.close()
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    try:
        return run(a)
    except UsageError as exc:
        print(f"netsum-worker: error: {exc}", file=sys.stderr)
        return 2
    except (WorkerError, OSError) as exc:
        print(f"netsum-worker: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("netsum-worker: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
