#!/usr/bin/env python3
"""Training sweeps under Mininet: each rank of a DDP job in its own Mininet host, gradients
summed by the P4 switch (netsum-hook, netsum-backend) or by gloo's ring between the same hosts
over the same shaped links, with the link-rate model next to every point.

    sudo .venv/bin/python mininet/train_sweep.py --workers 4 --bw 5 --model mlp \\
        --batch 16,256,1024 --data synthetic --comm gloo,netsum-hook --reps 2 --out results/t

Each point (topology x workers x link rate x loss x model x batch) gets a network of its own
(netsum/experiments/trainbed.py), built and torn down under the privileged lock (--lock), so
other users' privileged runs get their turn between points; the variants of one repetition run
back to back on it, so they see the same machine load.  Outputs in --out (rewritten after every
point): results.csv (one row per run: step time and its split, the model's prediction, bytes
per link per step measured on the host interfaces, P4 counters, load), pairs.csv (each netsum
variant's speed-up over gloo of the same repetition, measured and modelled), steps.csv (per
step: loss, time, test accuracy where evaluated), time_to_accuracy.csv (when each run reached
gloo's final accuracy), telemetry.csv.gz (host interface counters),
sweep.json (the command, the machine, its load) and the plots (netsum.experiments.trainplots).

No delay: this kernel has no netem (docs/experiments.md), so --delay is refused.  Loss: the P4
drop simulator for netsum's packets, iptables for gloo's TCP, as in mininet/sweep.py.
Exit status: 0 when every run succeeded, 1 otherwise or on an error, 2 for usage errors, 130
when interrupted.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import fcntl
import gzip
import itertools
import json
import os
import platform
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
try:
    from netsum.experiments import mnenv
except ImportError as _exc:
    sys.exit(f"train_sweep: error: cannot import {_exc.name or _exc} with {sys.executable}: "
             f"run it with the project's Python, e.g. sudo {ROOT / '.venv/bin/python'} {__file__}")

PROG = "train_sweep"
COMMS = ("gloo", "netsum-hook", "netsum-backend")
MODELS = ("cnn", "mlp", "transformer")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _list(kind: Any, name: str) -> Any:
    def parse(text: str) -> list[Any]:
        try:
            out = [kind(x.strip()) for x in text.split(",") if x.strip()]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{name}: {exc}") from None
        if not out:
            raise argparse.ArgumentTypeError(f"{name}: empty list")
        return out
    return parse


def _among(options: tuple[str, ...]) -> Any:
    def parse(text: str) -> str:
        if text not in options:
            raise ValueError(f"{text!r} is not one of {', '.join(options)}")
        return text
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Train through the P4 switch and with "
                                "gloo's ring, every rank in its own Mininet host, same links.")
    p.add_argument("--workers", type=_list(int, "--workers"), default=[4])
    p.add_argument("--topo", type=_list(_among(("single", "tree")), "--topo"),
                   default=["single"], help="single (one switch) and/or tree (root + 2 leaves)")
    p.add_argument("--bw", type=_list(float, "--bw"), default=[5.0],
                   help="link rate(s) in Mb/s on every link (TCLink, htb; default 5)")
    p.add_argument("--loss", type=_list(float, "--loss"), default=[0.0],
                   help="drop probability per worker link and direction")
    p.add_argument("--delay", default="", help="refused: this kernel has no netem")
    p.add_argument("--model", type=_list(_among(MODELS), "--model"), default=["mlp"])
    p.add_argument("--width", type=int, default=0, help="model size (the example's --width)")
    p.add_argument("--batch", type=_list(int, "--batch"), default=[16], help="per rank")
    p.add_argument("--data", choices=("digits", "synthetic"), default="digits")
    p.add_argument("--comm", type=_list(_among(COMMS), "--comm"),
                   default=["gloo", "netsum-hook"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--lanes", type=int, default=4)
    p.add_argument("--slots", type=int, default=32,
                   help="the job's slot window over all lanes (default 32: 8 per lane, 35 kB "
                   "in flight, 28 ms behind a 10 Mb/s link; 128 queued long enough for "
                   "spurious retransmissions, 12 %% more bytes than the model at 10 Mb/s)")
    p.add_argument("--bucket-kb", type=float, default=256.0, help="DDP bucket cap in KiB")
    p.add_argument("--eval-every", type=int, default=0, help="0: only at the end")
    p.add_argument("--k", type=int, default=256)
    p.add_argument("--limit", type=float, default=900.0, help="seconds per run")
    p.add_argument("--lock", default="/tmp/netsum-privileged.lock",
                   help="flock this file for each point's network ('' : no lock)")
    p.add_argument("--out", type=Path, default=Path("results/train-sweep"))
    p.add_argument("--redraw", type=Path, metavar="DIR",
                   help="only recompute DIR's pairs.csv and time_to_accuracy.csv from its "
                   "results.csv and steps.csv (the measurements) and redraw its plots")
    return p


def redraw(out: Path, k: int) -> list[Path]:
    """The files derived from a sweep's measurements, made again by this code."""
    from netsum.experiments import trainplots
    from netsum.experiments.points import read_csv, write_csv
    from netsum.experiments.trainpoints import (PAIR_FIELDS, TTA_FIELDS, pair_rows,
                                                time_to_accuracy)
    rows = read_csv(out / "results.csv")
    write_csv(out / "pairs.csv", pair_rows(rows, k), PAIR_FIELDS)
    write_csv(out / "time_to_accuracy.csv", time_to_accuracy(rows, read_csv(out / "steps.csv")),
              TTA_FIELDS)
    return trainplots.write_all(out)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    if not path:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _say(text: str) -> None:
    print(text, flush=True)


class Sweep:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.rows: list[dict[str, Any]] = []
        self.steps: list[tuple[object, ...]] = []
        self.telemetry: list[tuple[object, ...]] = []
        self.started = time.time()
        self.load0 = os.getloadavg()

    def points(self) -> list[dict[str, Any]]:
        a = self.a
        return [{"topo": t, "workers": n, "bw_mbps": bw, "loss": loss, "model": m,
                 "data": a.data, "batch": b}
                for t, n, bw, loss, m, b in itertools.product(a.topo, a.workers, a.bw, a.loss,
                                                              a.model, a.batch)]

    def example_args(self, p: dict[str, Any]) -> list[str]:
        a = self.a
        return ["--model", p["model"], "--width", str(a.width), "--batch", str(p["batch"]),
                "--data", p["data"], "--steps", str(a.steps), "--lr", str(a.lr),
                "--lanes", str(a.lanes), "--slots", str(a.slots), "--bucket-kb",
                str(a.bucket_kb), "--eval-every", str(a.eval_every), "--timeout", "120"]

    def run(self) -> bool:
        from netsum.experiments.testbed import NetSpec
        from netsum.experiments.trainbed import TrainBed
        from netsum.experiments.trainpoints import row_of
        a = self.a
        pts = self.points()
        total, done, all_ok = len(pts) * a.reps * len(a.comm), 0, True
        for i, p in enumerate(pts):
            name = (f"{p['topo']}-n{p['workers']}-bw{p['bw_mbps']:g}-l{p['loss']:g}-"
                    f"{p['model']}-b{p['batch']}")
            spec = NetSpec(p["workers"], p["topo"], p["bw_mbps"] or None, a.k, timeout=60.0)
            _say(f"{PROG}: point {i + 1}/{len(pts)}: {name} (waiting for the lock)"
                 if a.lock else f"{PROG}: point {i + 1}/{len(pts)}: {name}")
            with _locked(a.lock), TrainBed(spec, a.out / f"net-{name}") as bed:
                for rep in range(a.reps):
                    for comm in a.comm:
                        done += 1
                        run = bed.run(comm, self.example_args(p), a.limit, p["loss"],
                                      f"r{rep}")
                        run_id = f"{name}-{comm}-r{rep}"
                        row = row_of(run_id, p, rep, run, a.k)
                        self.rows.append(row)
                        self._keep(run_id, run)
                        all_ok &= run.ok
                        _say(_progress(done, total, row))
            self.write()
        return all_ok

    def _keep(self, run_id: str, run: Any) -> None:
        m = run.metrics
        evals = {int(e["step"]): float(e["test_accuracy"]) for e in m.get("evals", [])}
        for s in m.get("steps_log", []):
            step = int(s["step"])
            self.steps.append((run_id, run.comm, step, f"{s['loss']:.6f}", f"{s['wall_s']:.6f}",
                               f"{s['train_s']:.6f}", f"{s['t_wall']:.6f}",
                               evals.get(step, "")))
        hosts = [i for i in run.telemetry.interfaces if i.node.startswith("h")]
        keep = {(i.node, i.name) for i in hosts}
        for r in run.telemetry.rows(run_id, None, ("tx_bytes", "rx_bytes")):
            if (r[3], r[4]) in keep:
                self.telemetry.append((*r, round(run.telemetry.wall0, 6)))

    def write(self) -> None:
        from netsum.experiments import trainplots
        from netsum.experiments.points import write_csv
        from netsum.experiments.trainpoints import (FIELDS, PAIR_FIELDS, TTA_FIELDS, pair_rows,
                                                    time_to_accuracy)
        a = self.a
        a.out.mkdir(parents=True, exist_ok=True)
        write_csv(a.out / "results.csv", self.rows, FIELDS)
        write_csv(a.out / "pairs.csv", pair_rows(self.rows, a.k), PAIR_FIELDS)
        with open(a.out / "steps.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(("run", "comm", "step", "loss", "wall_s", "train_s", "t_wall",
                        "test_accuracy"))
            w.writerows(self.steps)
        steps = [dict(zip(("run", "comm", "step", "loss", "wall_s", "train_s", "t_wall",
                           "test_accuracy"), s)) for s in self.steps]
        write_csv(a.out / "time_to_accuracy.csv", time_to_accuracy(self.rows, steps),
                  TTA_FIELDS)
        with gzip.open(a.out / "telemetry.csv.gz", "wt", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(("run", "t_s", "source", "node", "item", "metric", "value", "wall0"))
            w.writerows(self.telemetry)
        meta = {"command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started)),
                "duration_s": round(time.time() - self.started, 1), "runs": len(self.rows),
                "cpus": os.cpu_count(), "kernel": platform.release(),
                "load_avg_start": self.load0, "load_avg_end": os.getloadavg()}
        (a.out / "sweep.json").write_text(json.dumps(meta, indent=1) + "\n")
        trainplots.write_all(a.out)


def _progress(done: int, total: int, r: dict[str, Any]) -> str:
    ok = "ok" if r["ok"] else f"FAILED: {r['error']}"
    return (f"  [{done}/{total}] {r['topo']} n={r['workers']} {r['bw_mbps']:g} Mb/s "
            f"{r['model']} b={r['batch']} {r['comm']:<14} rep {r['rep']}: step "
            f"{1e3 * r['step_s']:.0f} ms (model {1e3 * r['model_overlap_s']:.0f}), compute "
            f"{1e3 * (r['forward_s'] + r['backward_s'] + r['optimizer_s']):.0f} ms, "
            f"link {r['link_tx_bytes_step'] / 1e3:.0f} kB/step (model "
            f"{r['model_wire_bytes'] / 1e3:.0f}), util {r['link_util']:.2f}, acc "
            f"{100 * float(r['final_test_accuracy']):.1f}%, load {r['load_start']:.1f}  {ok}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    if a.redraw:
        try:
            for path in redraw(a.redraw, a.k):
                print(path)
        except (OSError, KeyError, ValueError) as exc:
            print(f"{PROG}: error: {a.redraw}: {exc}", file=sys.stderr)
            return 1
        return 0
    if a.delay:
        parser.error("--delay: this kernel has no netem (no sch_netem module), so link delay "
                     "cannot be emulated here; loss is --loss")
    if a.reps < 1 or a.steps <= 3:
        parser.error("--reps must be >= 1 and --steps > 3 (the first 3 steps are warm-up)")
    signal.signal(signal.SIGTERM, _interrupt)
    problem = mnenv.environment_problem()
    if problem:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return 1
    sweep = Sweep(a)
    try:
        return 0 if sweep.run() else 1
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; writing the {len(sweep.rows)} runs done",
              file=sys.stderr)
        if sweep.rows:
            sweep.write()
        return 130
    except Exception as exc:  # noqa: BLE001 - one line at the edge
        from netsum.experiments.testbed import TestbedError
        if not isinstance(exc, (TestbedError, OSError)):
            raise
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        if sweep.rows:
            sweep.write()
        return 1


if __name__ == "__main__":
    sys.exit(main())
