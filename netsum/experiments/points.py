"""Experiment sweeps: the points, the theory they are compared with, and their CSV rows.

Owns (pure, no Mininet): expanding sweep options into points, grouped so that every point of
one network (topology, workers, link rate, K, target) runs on the same network; the time each
algorithm needs on shaped links in theory (bytes each worker must move over its link, with
each algorithm's framing); the CSV columns (one row per run and algorithm) and turning a run
record into a row; the median with min and max per point and algorithm.

Theory.  On links of R bit/s, each worker must send (and receive) over its own link:
  ina   its tensor once, in netsum packets: ceil(E/K) frames of 14+20+8+H+4K bytes, plus one
        bootstrap use per slot of the window;
  ring  2(n-1)/n of its tensor, as TCP segments of 1448 payload bytes in 1514-byte frames,
        plus the ACKs of the stream coming the other way (one 66-byte ACK per two segments);
  ps    rank 0's link carries (n-1) tensors each way, in the same TCP framing.
The time is those bytes over R; the ring/ina speed-up tends to 2(n-1)/n when both framings
cost the same (K = 256: 1090-byte frames for 1024 payload bytes, 6.4 %; TCP 4.6 % + ACKs).
"""
from __future__ import annotations

import csv
import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netsum.wire import HEADER_BYTES

__all__ = ["Point", "NetKey", "expand", "theory_time", "ina_frame_bytes", "FIELDS", "row_of",
           "summarize", "as_float", "size_text", "write_csv", "read_csv", "TCP_MSS",
           "TCP_FRAME", "ACK_FRAME"]

TCP_MSS = 1448          # payload of a full segment with TCP timestamps (MTU 1500)
TCP_FRAME = 1514        # its Ethernet frame (no FCS: what htb and the counters count)
ACK_FRAME = 66          # a pure ACK with timestamps


@dataclass(frozen=True, slots=True)
class NetKey:
    """What one network is built from."""
    topo: str
    target: str
    workers: int
    bw: float | None
    k: int


@dataclass(frozen=True, slots=True)
class Point:
    net: NetKey
    elements: int
    loss: float


def expand(workers: Sequence[int], sizes: Sequence[int], bws: Sequence[float | None],
           losses: Sequence[float], ks: Sequence[int], topos: Sequence[str],
           targets: Sequence[str]) -> list[Point]:
    """Every combination; points of the same network next to each other (a network is built
    once for all of them)."""
    points = []
    for topo, target, n, bw, k in itertools.product(topos, targets, workers, bws, ks):
        if topo == "tree" and n < 2:
            continue
        net = NetKey(topo, target, n, bw, k)
        for elements, loss in itertools.product(sizes, losses):
            points.append(Point(net, elements, loss))
    return points


def ina_frame_bytes(k: int) -> int:
    return 14 + 20 + 8 + HEADER_BYTES + 4 * k


def theory_time(algo: str, workers: int, elements: int, k: int, bw_mbps: float | None,
                slots: int = 256) -> float:
    """Seconds the busiest link needs for `algo` at bw_mbps (nan when unshaped)."""
    if not bw_mbps:
        return float("nan")
    rate = bw_mbps * 1e6 / 8                      # bytes per second
    payload = 4 * elements
    tcp = TCP_FRAME / TCP_MSS * (1 + ACK_FRAME / (2 * TCP_FRAME))
    if algo == "ina":
        blocks = -(-elements // k)
        return (blocks + min(slots, blocks)) * ina_frame_bytes(k) / rate
    if workers < 2:
        return 0.0
    if algo == "ring":
        return 2 * (workers - 1) / workers * payload * tcp / rate
    if algo == "ps":
        return (workers - 1) * payload * tcp / rate
    raise ValueError(f"no theory for algorithm {algo!r}")


#: One row per run and algorithm.
FIELDS = (
    "run", "topo", "target", "workers", "elements", "size_bytes", "k", "bw_mbps", "loss",
    "algo", "rep", "ok", "time_s", "theory_time_s", "wall_s", "goodput_mbps",
    "goodput_min_mbps", "goodput_max_mbps", "packets_sent", "retransmissions",
    "retx_fraction", "injected_drops", "latency_p50_ms", "latency_p99_ms", "max_error_ratio",
    "host_tx_bytes", "host_rx_bytes", "uplink_bytes", "link_util_mean", "link_util_peak",
    "switch_cpu_s", "switch_pps", "data_in", "results_out", "switch_retx", "partials_up",
    "switch_drops", "root_in_per_chunk", "leaf_in_per_chunk", "root_new_per_chunk",
    "leaf_new_per_chunk", "late_max_s", "load_avg", "error",
)


def _median(values: Iterable[float]) -> float:
    v = [x for x in values if not math.isnan(x)]
    return statistics.median(v) if v else float("nan")


def _new(p4_row: dict[str, object]) -> int:
    """Data packets a switch counted that were not retransmissions."""
    return _int(p4_row.get("data_in")) - _int(p4_row.get("retx"))


def row_of(run_id: str, point: Point, rep: int, run: Any, slots: int = 256) -> dict[str, object]:
    """A CSV row from a testbed run record (netsum/experiments/testbed.py's Run: outcome, telemetry,
    per-worker lateness, latencies, injected drops, switch CPU, P4 counters)."""
    net = point.net
    out = run.outcome
    workers = out.workers
    time_s = run.time_s
    # Per-worker goodput over the common time: what a training step would see.
    bits = 32 * point.elements
    per = [bits / (late + w.elapsed_s) / 1e6 for late, w in zip(run.late_s, workers)
           if w.elapsed_s > 0]
    sent = sum(w.packets_sent for w in workers)
    retx = sum(w.retransmissions for w in workers)
    lat = [x for arr in run.latencies for x in arr.tolist()]
    p50, p99 = (_quantile(lat, 0.5) * 1e3, _quantile(lat, 0.99) * 1e3) if lat else (
        float("nan"), float("nan"))
    tel = run.telemetry
    totals = tel.totals()
    host_if = {(i.node, i.name) for i in tel.interfaces if i.node.startswith("h")}
    up_if = {(i.node, i.name) for i in tel.interfaces
             if not i.node.startswith("h") and not i.link.startswith("h")}
    tx = sum(c.tx_bytes for key, c in totals.items() if key in host_if)
    rx = sum(c.rx_bytes for key, c in totals.items() if key in host_if)
    uplink = sum(c.tx_bytes for key, c in totals.items() if key in up_if)
    util_mean, util_peak = _utilisation(tel, host_if, net.bw, time_s)
    p4 = _p4_totals(run.p4)
    blocks = -(-point.elements // net.k)
    uses = blocks + min(slots, blocks)
    root = next((r for r in run.p4 if r.get("role") == "root"), None)
    leaves = [r for r in run.p4 if r.get("role") == "leaf"]
    pkts = sum(c.tx_packets + c.rx_packets for key, c in totals.items() if key in host_if)
    errors = [w.error for w in workers if w.error]
    return {
        "run": run_id, "topo": net.topo, "target": net.target, "workers": net.workers,
        "elements": point.elements, "size_bytes": 4 * point.elements, "k": net.k,
        "bw_mbps": net.bw or 0, "loss": point.loss, "algo": run.algo, "rep": rep,
        "ok": out.ok, "time_s": time_s,
        "theory_time_s": theory_time(run.algo, net.workers, point.elements, net.k, net.bw, slots),
        "wall_s": out.wall_s, "goodput_mbps": _median(per),
        "goodput_min_mbps": min(per, default=float("nan")),
        "goodput_max_mbps": max(per, default=float("nan")),
        "packets_sent": sent, "retransmissions": retx,
        "retx_fraction": retx / sent if sent else float("nan"),
        "injected_drops": run.injected_drops, "latency_p50_ms": p50, "latency_p99_ms": p99,
        "max_error_ratio": max((w.error_ratio for w in workers), default=float("nan")),
        "host_tx_bytes": tx, "host_rx_bytes": rx, "uplink_bytes": uplink,
        "link_util_mean": util_mean, "link_util_peak": util_peak,
        "switch_cpu_s": run.switch_cpu_s,
        "switch_pps": pkts / time_s if time_s > 0 else float("nan"),
        "data_in": p4.get("data_in", 0), "results_out": p4.get("results_out", 0),
        "switch_retx": p4.get("retx", 0), "partials_up": p4.get("partials_up", 0),
        "switch_drops": sum(v for key, v in p4.items() if key.startswith("drop_")),
        "root_in_per_chunk": (_int(root.get("data_in")) / uses
                              if root is not None and leaves else float("nan")),
        "leaf_in_per_chunk": (sum(_int(r.get("data_in")) for r in leaves) / len(leaves) / uses
                              if leaves else float("nan")),
        # The same without the switch's retransmission counter: contributions per use (the
        # root's is exactly the number of leaves when each leaf sends one partial per chunk).
        "root_new_per_chunk": (_new(root) / uses if root is not None and leaves
                               else float("nan")),
        "leaf_new_per_chunk": (sum(_new(r) for r in leaves) / len(leaves) / uses
                               if leaves else float("nan")),
        "late_max_s": max(run.late_s, default=0.0), "load_avg": run.load_avg,
        "error": errors[0][:200] if errors else "",
    }


def size_text(size_bytes: object) -> str:
    """'2 MiB', '512 KiB', '4000 B': a tensor size as --size wrote it (binary units)."""
    n = int(as_float(size_bytes))
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % (scale // 16) == 0:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def _int(v: object) -> int:
    return v if isinstance(v, int) else 0


def as_float(v: object) -> float:
    """A CSV or row value as a float (nan when it is not a number)."""
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v))
    except ValueError:
        return float("nan")


def _quantile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _p4_totals(rows: Sequence[Mapping[str, object]]) -> dict[str, int]:
    """Job counters over the switches where workers contribute (leaves in a tree)."""
    mine = [r for r in rows if r.get("role") == "leaf"] or list(rows)
    total: dict[str, int] = {}
    for r in mine:
        for key, value in r.items():
            if isinstance(value, int) and key != "job":
                total[key] = total.get(key, 0) + value
    return total


def _utilisation(tel: Any, host_if: set[tuple[str, str]], bw: float | None,
                 time_s: float) -> tuple[float, float]:
    """(mean over host links of their busier direction's bytes over the run time, peak over
    sampling intervals), as fractions of the link rate; nan when unshaped."""
    if not bw or not time_s or time_s != time_s:
        return float("nan"), float("nan")
    cap = bw * 1e6 / 8
    totals = tel.totals()
    means = [max(c.tx_bytes, c.rx_bytes) / time_s / cap for key, c in totals.items()
             if key in host_if]
    peak = 0.0
    for node, name in host_if:
        for metric in ("tx_bytes", "rx_bytes"):
            for _, rate in tel.rates(node, name, metric):
                peak = max(peak, rate / cap)
    return (statistics.mean(means) if means else float("nan")), peak


def summarize(rows: Sequence[Mapping[str, object]],
              value: str = "time_s") -> list[dict[str, object]]:
    """Median, min and max of `value` per point and algorithm (rows of ok runs only)."""
    groups: dict[tuple[object, ...], list[float]] = {}
    keys = ("topo", "target", "workers", "elements", "k", "bw_mbps", "loss", "algo")
    for r in rows:
        if str(r.get("ok")) not in ("True", "true", "1"):
            continue
        v = as_float(r[value])
        groups.setdefault(tuple(r[k] for k in keys), []).append(v)
    out = []
    for key, vals in groups.items():
        out.append({**dict(zip(keys, key)), "n": len(vals), "median": statistics.median(vals),
                    "min": min(vals), "max": max(vals)})
    return out


def write_csv(path: Path, rows: Sequence[Mapping[str, object]],
              fields: Sequence[str] = FIELDS) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(fields), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def read_csv(path: Path) -> list[dict[str, object]]:
    """Rows with numbers as numbers (int, else float, else the text)."""
    def conv(text: str) -> object:
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text
    with open(path, newline="") as fh:
        return [{k: conv(v) for k, v in row.items()} for row in csv.DictReader(fh)]
