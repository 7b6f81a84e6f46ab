"""Why workers retransmit on a link that loses nothing: counts and causes, per run.

    python benchmarks/spurious.py [--elements N] [--workers 4] [--mode udp,shm] [--repeat R]
                                  [--loss 0.0] [--core traced,native] [--timers hold,all]
                                  [--k 256]

Each run is one all-reduce of N float32 per worker through the embedded switch (netsum.rig,
real netsum-worker processes).  Core `native`: the default compiled core; counted only
(retransmissions, fast ones, Stats.spurious).  Core `traced`: the Python core with
NETSUM_RETX_TRACE set (workers/retxtrace.py), whose traces of every retransmission and its
answer are classified here.  `--timers`: the workers' timers held (the default,
Timing.hold_timers) or all firing on their own (`netsum-worker --all-timers`, the behaviour
before), runs of each alternated.  A retransmitted use is classified once, by its first
retransmission and how it was answered:

  fast      sent on a gap (fast retransmit), not by the timer
  late      the timer fired > 5 ms after it was due: this process was not running (b)
  status    a STATUS answered it: the switch held this worker's copy and waited for another
            member's contribution; the slot's round trip includes the skew between workers (c)
  silent    no result of any slot reached this worker for more than half the wait: the
            switch (or every other worker) stalled (d)
  early     answered within the least RTT of the retransmission, with results flowing: the
            original result was already on its way, the RTO was below this use's RTT (a)
  needed    answered later than that with no STATUS: the copy was lost (or, at 0 % loss,
            never distinguishable from one)

The table also gives the RTT samples (median, p99, max) and the RTO the retransmissions
waited (median), so (a) can be read as "RTO against the RTT distribution".
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from netsum.rig import Mode, Rig, RigConfig
from netsum.tensors import synthetic_inputs

KINDS = ("fast", "late", "status", "silent", "early", "needed")
LATE_S = 0.005


def classify(retx: dict[str, Any], answer: dict[str, Any] | None) -> str:
    """The cause of one retransmitted use (see the module docstring), from its first
    retransmission and its answer (None: never answered in this trace)."""
    if retx["fast"]:
        return "fast"
    if retx["late"] > LATE_S:
        return "late"
    if answer is not None and answer["status"]:
        return "status"
    since_rx = retx["since_rx"]
    if since_rx is not None and since_rx > retx["waited"] / 2:
        return "silent"
    if answer is not None and answer["since_tx"] < (retx["min_rtt"] or 0.0) + 1e-9 \
            and answer["attempts"] == 1:
        return "early"
    return "needed"


def analyse(traces: list[dict[str, Any]]) -> dict[str, Any]:
    kinds: Counter[str] = Counter()
    rtts: list[float] = []
    waited: list[float] = []
    for tr in traces:
        rtts += tr["rtt"]
        answers = {(a["slot"], a["block"]): a for a in tr["answers"]}
        seen: set[tuple[int, int]] = set()
        for r in tr["retx_log"]:
            key = (r["slot"], r["block"])
            if key in seen:
                continue
            seen.add(key)
            if not r["fast"]:
                waited.append(r["waited"])
            kinds[classify(r, answers.get(key))] += 1
    rtts.sort()

    def pct(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3 if xs else float("nan")

    return {"kinds": kinds, "rtt_p50": pct(rtts, 0.5), "rtt_p99": pct(rtts, 0.99),
            "rtt_max": pct(rtts, 1.0),
            "rto_p50": statistics.median(waited) * 1e3 if waited else float("nan")}


def run_once(mode: Mode, workers: int, elements: int, loss: float, traced: bool,
             seed: int, timers: str = "hold", k: int = 256) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="netsum-spurious-") as tmp:
        work = Path(tmp)
        tdir = work / "trace"
        env_was = os.environ.get("NETSUM_RETX_TRACE")
        if traced:
            os.environ["NETSUM_RETX_TRACE"] = str(tdir)
        else:
            os.environ.pop("NETSUM_RETX_TRACE", None)
        try:
            cfg = RigConfig(work / "rig", workers=workers, k=k, mode=mode, slots=256,
                            timeout=20, loss=loss, seed=seed)
            inputs = synthetic_inputs(workers, (elements,), seed=seed)
            start = ["--start-at", f"{time.time() + 3.0:.3f}"] + \
                (["--all-timers"] if timers == "all" else [])
            with Rig(cfg) as rig:
                job = rig.start_job(inputs, worker_args=start)
                out = job.wait()
                rows = []
                for c in job.children:
                    text = c.log_path.read_text(errors="replace") if c.log_path else ""
                    rows += [json.loads(x) for x in text.splitlines() if x.startswith("{")]
        finally:
            if env_was is None:
                os.environ.pop("NETSUM_RETX_TRACE", None)
            else:
                os.environ["NETSUM_RETX_TRACE"] = env_was
        traces = [json.loads(p.read_text()) for p in sorted(tdir.glob("*.json"))] \
            if traced else []
    res: dict[str, Any] = {
        "ok": out.ok, "sent": sum(r.get("packets_sent", 0) for r in rows),
        "retx": sum(r.get("retransmissions", 0) for r in rows),
        "fast": sum(r.get("fast_retransmissions", 0) for r in rows),
        "spurious": sum(r.get("spurious", 0) for r in rows),
        "slowest": max(w.elapsed_s for w in out.workers)}
    if traced:
        res.update(analyse(traces))
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, default=1 << 20)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--mode", default="udp,shm")
    ap.add_argument("--loss", type=float, default=0.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--core", default="traced,native")
    ap.add_argument("--timers", default="hold", help="hold, all, or both: hold,all")
    ap.add_argument("--k", type=int, default=256)
    a = ap.parse_args(argv)
    modes = [Mode(m) for m in a.mode.split(",")]
    cores = a.core.split(",")
    timers = a.timers.split(",")
    print(f"{a.workers} workers, {a.elements} float32 each, K={a.k}, loss {a.loss:.1%}, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    head = (f"{'mode':5} {'core':7} {'timer':5} {'ok':3} {'time s':>7} {'sent':>7} {'retx':>6} {'%':>5} "
            f"{'fast':>5} {'spur':>5}  {'rtt p50/p99/max ms':>19} {'rto':>5}  causes")
    print(head)
    for rep in range(a.repeat):
        for mode in modes:
            for core, tm in [(c, t) for c in cores for t in timers]:  # alternated, so
                # load drifts hit both alike
                r = run_once(mode, a.workers, a.elements, a.loss, core == "traced", 1 + rep,
                             tm, a.k)
                line = (f"{mode.value:5} {core:7} {tm:5} {'y' if r['ok'] else 'N':3} "
                        f"{r['slowest']:7.3f} {r['sent']:7d} {r['retx']:6d} "
                        f"{100 * r['retx'] / max(1, r['sent']):5.2f} {r['fast']:5d} "
                        f"{r['spurious']:5d}")
                if core == "traced":
                    k = r["kinds"]
                    line += (f"  {r['rtt_p50']:5.1f}/{r['rtt_p99']:5.1f}/{r['rtt_max']:6.1f} "
                             f"{r['rto_p50']:5.1f}  " +
                             " ".join(f"{x}={k[x]}" for x in KINDS if k[x]))
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
