"""`netsum-worker --algo ring|ps`: the host all-reduces on the worker's command line.

Owns the options that only the host algorithms take (`--peers`, `--piece-bytes`, `--deadline`),
running the iterations, and their report: the same JSON keys as the switch all-reduce's
(`elements_per_s`, `packets_sent`, `retransmissions`, chunk latency percentiles), so whatever
reads netsum-worker's output reads both; `packets_sent` and `retransmissions` are the kernel's
TCP data segments here (`segments_sent` adds the pure ACKs).
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from netsum.workers.hostnet import parse_peers
from netsum.workers.ps import HostServer
from netsum.workers.ring import PIECE_BYTES, HostAllreduce, HostJob, HostResult, HostRing

__all__ = ["add_arguments", "host_job", "run_host", "report", "wait_until", "ALGORITHMS"]

ALGORITHMS = ("ina", "ring", "ps")


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("host all-reduce (--algo ring|ps: no switch involved)")
    g.add_argument("--algo", choices=ALGORITHMS, default="ina",
                   help="ina: through the switch (default); ring: bandwidth-optimal ring "
                        "all-reduce between the workers over TCP; ps: rank 0 sums (parameter "
                        "server) over TCP")
    g.add_argument("--peers", metavar="IP[:PORT],...",
                   help="every worker's listening address, in rank (ring) order; this worker "
                        "listens on the one at --rank (default port 28276)")
    g.add_argument("--piece-bytes", type=int, default=PIECE_BYTES, metavar="N",
                   help=f"bytes of values per message (whole K-blocks; default {PIECE_BYTES})")
    g.add_argument("--deadline", type=float, metavar="S",
                   help="seconds for a whole all-reduce call (default: only --timeout)")


def host_job(a: argparse.Namespace) -> HostJob:
    """The HostJob of the options; ValueError with the reason when they do not make one."""
    if not a.peers:
        raise ValueError(f"--algo {a.algo} needs --peers")
    peers = parse_peers(a.peers)
    if len(peers) != a.workers:
        raise ValueError(f"--peers lists {len(peers)} addresses for --workers {a.workers}")
    return HostJob(a.job, peers, a.rank, k=a.k, piece_bytes=a.piece_bytes, timeout=a.timeout)


def report(a: argparse.Namespace, it: int, res: HostResult, ok: bool | None,
           late: float = 0.0) -> str:
    st = res.stats
    p50, p99 = st.latency_percentiles()
    rate = res.tensor.size / st.elapsed if st.elapsed > 0 else float("inf")
    row = dict(iteration=it, job=a.job, algorithm=st.algorithm, elements=int(res.tensor.size),
               elapsed_s=st.elapsed, elements_per_s=rate,
               packets_sent=st.data_segments_sent,
               segments_sent=st.segments_sent, retransmissions=st.retransmissions, bytes_sent=st.bytes_sent,
               bytes_received=st.bytes_received, messages_sent=st.messages_sent,
               connect_s=st.connect_s, exponents_s=st.exponents_s,
               chunk_latency_p50_ms=p50 * 1e3, chunk_latency_p99_ms=p99 * 1e3,
               start_late_s=late, check=ok)
    if a.json:
        return json.dumps(row)
    check = "" if ok is None else ("  check ok" if ok else "  CHECK FAILED")
    return (f"iteration {it}: {st.algorithm}: {row['elements']} elements in {st.elapsed:.3f}s "
            f"({rate / 1e6:.2f} M elem/s), {st.bytes_sent} bytes sent, {st.data_segments_sent} "
            f"TCP data segments ({st.retransmissions} again), chunk latency p50 "
            f"{p50 * 1e3:.2f} ms p99 {p99 * 1e3:.2f} ms{check}")


def wait_until(start_at: float | None) -> float:
    """Sleep until the wall-clock time `start_at`; how late we were (s, 0 if on time)."""
    if start_at is None:
        return 0.0
    late = time.time() - start_at
    if late < 0:
        time.sleep(-late)
    return max(0.0, late)


def run_host(a: argparse.Namespace, job: HostJob, tensor: np.ndarray,
             check: Callable[[HostResult], bool] | None) -> int:
    status = 0
    res: HostResult | None = None
    runner: HostAllreduce = HostRing(job) if a.algo == "ring" else HostServer(job)
    with runner:
        late = 0.0
        if a.start_at is not None:
            # Connections first (they absorb the workers' start-up), then the common start.
            runner.connect(max(a.timeout, a.start_at - time.time() + a.timeout))
            late = wait_until(a.start_at)
        for it in range(a.iterations):
            res = runner.allreduce(tensor, a.deadline)
            ok = check(res) if check is not None else None
            print(report(a, it, res, ok, late), flush=True)
            if ok is False:
                status = 1
    assert res is not None
    if a.output is not None:
        np.save(a.output, res.tensor)
    if a.latencies is not None:
        np.save(Path(a.latencies), res.stats.latencies)
    return status
