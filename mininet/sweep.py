#!/usr/bin/env python3
"""Sweeps under Mininet: in-network aggregation against the host all-reduces on the same
hosts and links, with telemetry, a CSV and plots.

    sudo .venv/bin/python mininet/sweep.py --workers 2,4,8 --size 4MB --bw 20 \\
        --algo ina,ring --reps 3 --out results/sweep

Each network (topology x workers x link rate x K x target) is built once (netsum/experiments/testbed.py)
and every point on it (tensor size x loss) is run `--reps` times, the algorithms of a
repetition one after the other, so that they are measured side by side on a shared machine.
Outputs in --out: results.csv (one row per run and algorithm, netsum.experiments.points.FIELDS),
summary.csv (median, min and max of time and goodput per point and algorithm),
telemetry.csv.gz (interface and P4 counters over time, long format), latency_quantiles.csv, the
PNGs of netsum.experiments.plots, sweep.json (the command, the machine, its load) and logs/.

Invariant: everything a network started is stopped (Testbed.close in a finally) before the
next is built; Ctrl-C and SIGTERM take that path, then the results so far are written.
Exit status: 0 when every run's result was correct, 1 otherwise or on an error (one line),
2 for usage errors, 130 when interrupted.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import platform
import shlex
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
try:
    from netsum.experiments import mnenv
except ImportError as _exc:  # e.g. Debian's python3: it sees Mininet but not the project
    sys.exit(f"sweep: error: cannot import {_exc.name or _exc} with {sys.executable}: run "
             f"it with the project's Python, e.g. sudo {ROOT / '.venv/bin/python'} {__file__}")

PROG = "sweep"
#: INA workers' timing on shaped links: Linux TCP's RTO floor (TCP_RTO_MIN, 200 ms) instead of
#: the worker's 5 ms, which a link serialising a 1 KB frame in milliseconds and queueing a
#: window of them exceeds (spurious retransmissions then take a third of the link).
INA_ARGS = "--rto 0.2 --rto-min 0.2"
#: Interface counters written to telemetry.csv (drops stay in the run's totals).
METRICS = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets")
ALGOS = ("ina", "ring", "ps")
TOPOS = ("single", "tree")


class SweepError(Exception):
    pass


@dataclass
class Collected:
    """What the sweep gathered so far (written even after an interruption)."""
    rows: list[dict[str, object]] = field(default_factory=list)
    telemetry: list[tuple[object, ...]] = field(default_factory=list)
    quantiles: list[dict[str, object]] = field(default_factory=list)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _list(kind: Callable[[str], Any], name: str) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        out = []
        for item in text.split(","):
            try:
                out.append(kind(item.strip()))
            except (ValueError, argparse.ArgumentTypeError) as exc:
                raise argparse.ArgumentTypeError(f"{name}: {item!r}: {exc}") from None
        if not out:
            raise argparse.ArgumentTypeError(f"{name}: empty list")
        return out
    return parse


def _choice(options: Sequence[str]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in options:
            raise ValueError(f"not one of {', '.join(options)}")
        return text
    return parse


def _loss(text: str) -> float:
    v = float(text)
    if not 0.0 <= v < 1.0:
        raise ValueError("must be in [0, 1)")
    return v


def _bw(text: str) -> float | None:
    v = float(text)
    if v < 0:
        raise ValueError("must be >= 0 (0: unshaped)")
    return v or None


def _workers(text: str) -> int:
    v = int(text)
    if not 1 <= v <= 32:
        raise ValueError("must be 1..32")
    return v


def build_parser() -> argparse.ArgumentParser:
    from netsum.cli import parse_size
    from netsum.wire import K_DEFAULT, K_SUPPORTED
    p = argparse.ArgumentParser(
        prog=PROG, description="Sweep all-reduce algorithms under Mininet: INA through the P4 "
        "switch vs ring (and parameter server) between the hosts, on the same links.")
    p.add_argument("--workers", type=_list(_workers, "--workers"), default=[4],
                   help="worker counts, e.g. 2,4,8 (default 4)")
    p.add_argument("--size", type=_list(parse_size, "--size"), default=[parse_size("1MB")],
                   help="tensor per worker, e.g. 256KB,1MB,4MB or elements 4096e (default 1MB)")
    p.add_argument("--bw", type=_list(_bw, "--bw"), default=[20.0],
                   help="link rate(s) in Mb/s on every link (TCLink, htb); 0: unshaped "
                        "(default 20)")
    p.add_argument("--loss", type=_list(_loss, "--loss"), default=[0.0],
                   help="drop probability per worker link and direction, e.g. 0,0.01,0.05")
    p.add_argument("--k", type=_list(_choice([str(k) for k in K_SUPPORTED]), "--k"),
                   default=[str(K_DEFAULT)], help=f"values per packet "
                   f"({', '.join(map(str, K_SUPPORTED))}; default {K_DEFAULT})")
    p.add_argument("--topo", type=_list(_choice(TOPOS), "--topo"), default=["single"],
                   help="single (one switch) and/or tree (a root and 2 leaf switches)")
    p.add_argument("--target", type=_list(_choice(("embedded", "bmv2")), "--target"),
                   default=["embedded"], help="netsum-switch or real simple_switch_grpc")
    p.add_argument("--algo", type=_list(_choice(ALGOS), "--algo"), default=["ina", "ring"],
                   help="ina (switch), ring, ps (default ina,ring)")
    p.add_argument("--reps", type=int, default=3, help="repetitions per point (default 3)")
    p.add_argument("--slots", type=int, default=256, help="INA window: slots per job")
    p.add_argument("--ina-args", default=INA_ARGS, metavar="'OPTIONS'",
                   help="extra netsum-worker options for the INA workers (one string; default "
                        f"{INA_ARGS!r}: TCP's minimum retransmission timeout, the one the "
                        "host algorithms get from the kernel; '' for the worker's defaults)")
    p.add_argument("--piece-bytes", type=int, default=16384, metavar="N",
                   help="ring and parameter server: bytes of values per message (default 16384)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="a worker's no-progress deadline (s)")
    p.add_argument("--seed", type=int, default=0, help="tensors and drop simulator")
    p.add_argument("--sample-interval", type=float, default=0.1,
                   help="interface counters every S seconds (default 0.1)")
    p.add_argument("--p4-interval", type=float, default=0.5,
                   help="P4 counters from the controller every S seconds (default 0.5)")
    p.add_argument("--out", type=Path, default=Path("results/sweep"))
    return p


def _say(out: IO[str], text: str) -> None:
    out.write(text + "\n")
    out.flush()


def run_sweep(a: argparse.Namespace, got: Collected, out: IO[str]) -> bool:
    """Run every point; True when every result was correct."""
    from netsum.experiments import testbed as T

    from netsum.experiments.plots import latency_quantile_rows
    from netsum.experiments.points import expand, row_of
    from netsum.tensors import synthetic_inputs

    points = expand(a.workers, a.size, a.bw, a.loss, [int(k) for k in a.k], a.topo, a.target)
    total = len(points) * a.reps * len(a.algo)
    done = 0
    all_ok = True
    nets: dict[Any, list[Any]] = {}
    for p in points:
        nets.setdefault(p.net, []).append(p)
    for net, pts in nets.items():
        spec = T.NetSpec(net.workers, net.topo, net.bw, net.k, net.target, a.slots, a.seed,
                         a.timeout, tuple(shlex.split(a.ina_args)), a.piece_bytes)
        _say(out, f"{PROG}: network: {net.topo}, {net.workers} workers, "
                  f"{'%g Mb/s' % net.bw if net.bw else 'unshaped'} links, K={net.k}, "
                  f"{net.target} switch")
        with T.Testbed(spec, a.out / f"net-{net.topo}-n{net.workers}-bw{net.bw or 0:g}-"
                       f"k{net.k}-{net.target}", a.sample_interval, a.p4_interval) as tb:
            for p in pts:
                inputs = synthetic_inputs(net.workers, (p.elements,), a.seed)
                for rep in range(a.reps):
                    for algo in a.algo:
                        done += 1
                        run_id = f"{net.topo}-n{net.workers}-bw{net.bw or 0:g}-k{net.k}-" \
                                 f"{net.target}-e{p.elements}-l{p.loss:g}-{algo}-r{rep}"
                        run = tb.run(algo, inputs, p.loss)
                        row = row_of(run_id, p, rep, run, a.slots)
                        got.rows.append(row)
                        got.telemetry += run.telemetry.rows(run_id, run.start_at, METRICS)
                        all_ok &= bool(run.outcome.ok)
                        _say(out, _progress(done, total, row))
                        _keep_plots(got, run, row, run_id, latency_quantile_rows)
    return all_ok


def _progress(done: int, total: int, r: dict[str, object]) -> str:
    from netsum.experiments.points import size_text
    ok = "ok" if r["ok"] else f"FAILED: {r['error']}"
    return (f"  [{done}/{total}] {r['topo']} n={r['workers']} {size_text(r['size_bytes'])} "
            f"loss={r['loss']:g} {r['algo']:<4} rep {r['rep']}: {r['time_s']:.2f} s "
            f"(theory {r['theory_time_s']:.2f}), {r['goodput_mbps']:.2f} Mb/s/worker, "
            f"retx {r['retransmissions']}, util {r['link_util_mean']:.2f}, "
            f"load {r['load_avg']:.1f}  {ok}")


def _keep_plots(got: Collected, run: Any, row: dict[str, object], run_id: str,
                quantile_rows: Callable[..., list[dict[str, object]]]) -> None:
    """Latency quantiles of the first repetition of each point (the CDF plot)."""
    from netsum.experiments.points import size_text
    if row["rep"] != 0:
        return
    lat = [x for arr in run.latencies for x in arr.tolist()]
    label = (f"{row['algo']} n={row['workers']} {row['topo']} {size_text(row['size_bytes'])} "
             f"loss {row['loss']:g}")
    got.quantiles += quantile_rows(label, str(row["algo"]), lat)


def write_outputs(a: argparse.Namespace, got: Collected, started: float,
                  load_start: tuple[float, float, float], out: IO[str]) -> list[Path]:
    from netsum.experiments import plots as expplots
    from netsum.experiments.points import FIELDS, summarize, write_csv
    a.out.mkdir(parents=True, exist_ok=True)
    write_csv(a.out / "results.csv", got.rows)
    summary = []
    for value in ("time_s", "goodput_mbps"):
        for r in summarize(got.rows, value):
            summary.append({"value": value, **r})
    keys = ("value", "topo", "target", "workers", "elements", "k", "bw_mbps", "loss", "algo",
            "n", "median", "min", "max")
    write_csv(a.out / "summary.csv", summary, keys)
    # Tens of thousands of rows per run: compressed (pandas and csv read it as it is).
    with gzip.open(a.out / "telemetry.csv.gz", "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(expplots.TELEMETRY_COLUMNS)
        w.writerows(got.telemetry)
    write_csv(a.out / "latency_quantiles.csv", got.quantiles, ("label", "algo", "q",
                                                                "latency_ms"))
    from netsum.experiments.plots import TELEMETRY_COLUMNS
    pngs = expplots.write_from(a.out, got.rows, got.quantiles,
                               [dict(zip(TELEMETRY_COLUMNS, t)) for t in got.telemetry])
    meta = {"command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
            "duration_s": round(time.time() - started, 1), "runs": len(got.rows),
            "cpus": os.cpu_count(), "kernel": platform.release(),
            "load_avg_start": load_start, "load_avg_end": os.getloadavg(),
            "columns": list(FIELDS)}
    (a.out / "sweep.json").write_text(json.dumps(meta, indent=1) + "\n")
    _say(out, f"{PROG}: wrote {a.out / 'results.csv'} ({len(got.rows)} runs), summary.csv, "
              f"telemetry.csv.gz, latency_quantiles.csv and {len(pngs)} plots")
    _say(out, _table(summary))
    return pngs


def _table(summary: list[dict[str, object]]) -> str:
    from netsum.experiments.points import size_text
    lines = [f"{'topo':<7}{'n':>3} {'size':>8} {'loss':>6} {'algo':<5} {'time s (min-max)':>22}"
             f" {'goodput Mb/s':>13}"]
    good = {tuple(r[k] for k in ("topo", "workers", "elements", "loss", "algo", "bw_mbps",
                                 "k")): r for r in summary if r["value"] == "goodput_mbps"}
    for r in summary:
        if r["value"] != "time_s":
            continue
        g = good.get(tuple(r[k] for k in ("topo", "workers", "elements", "loss", "algo",
                                          "bw_mbps", "k")))
        lines.append(f"{r['topo']!s:<7}{r['workers']!s:>3} "
                     f"{size_text(4 * int(str(r['elements']))):>8} {float(str(r['loss'])):>6g} "
                     f"{r['algo']!s:<5} {float(str(r['median'])):>8.2f} "
                     f"({float(str(r['min'])):.2f}-{float(str(r['max'])):.2f})      "
                     f"{float(str(g['median'])) if g else float('nan'):>10.2f}")
    # INA against the host algorithms, point by point: the figure the sweep is for.
    times = {tuple(r[k] for k in ("topo", "workers", "elements", "loss", "bw_mbps", "k",
                                  "algo")): float(str(r["median"]))
             for r in summary if r["value"] == "time_s"}
    for key, t in sorted(times.items(), key=lambda kv: str(kv[0])):
        if key[-1] == "ina" or t <= 0:
            continue
        ina = times.get((*key[:-1], "ina"))
        if ina:
            n = int(str(key[1]))
            theory = 2 * (n - 1) / n if key[-1] == "ring" else n - 1
            size = size_text(4 * int(str(key[2])))
            lines.append(f"speed-up {key[-1]}/ina: {key[0]} n={n} {size} loss "
                         f"{float(str(key[3])):g}: {t / ina:.2f}x (medians; theory "
                         f"{theory:.2f}x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    if a.reps < 1:
        parser.error("--reps must be at least 1")
    signal.signal(signal.SIGTERM, _interrupt)
    problem = mnenv.environment_problem()
    if problem:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return 1
    got = Collected()
    started, load = time.time(), os.getloadavg()
    status = 1
    try:
        status = 0 if run_sweep(a, got, sys.stdout) else 1
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; every network is stopped; writing the "
              f"{len(got.rows)} runs done", file=sys.stderr)
        status = 130
    except Exception as exc:  # noqa: BLE001 - one line at the edge
        from netsum.experiments import testbed as T
        if not isinstance(exc, (T.TestbedError, SweepError, OSError)):
            raise
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        status = 1
    if got.rows:
        write_outputs(a, got, started, load, sys.stdout)
    return status


if __name__ == "__main__":
    sys.exit(main())
