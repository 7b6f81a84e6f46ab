"""Training experiments, pure: the link-rate model of an iteration, CSV rows of training runs,
and per-point summaries (no Mininet, no torch).

The model.  A DDP step is forward (F), backward (B) with the gradient buckets handed to the
collective as backward fills them, and the optimizer (O).  On links of R bit/s each rank's
link must carry, each way, per step:
  netsum   every bucket once, in netsum frames: (ceil(E/K) + min(W, ceil(E/K))) frames of
           14+20+8+H+4K bytes for a bucket of E values, W = the lane's slot window (one
           exponent bootstrap use per slot per call) -- S per link each way;
  gloo     2(n-1)/n of the gradient (ring reduce-scatter + all-gather) as TCP segments (1448
           payload bytes in 1514-byte frames, one 66-byte ACK per two segments coming back).
With C = bytes / R the communication time:
  no overlap     F + B + C + O
  with overlap   F + max(B + C_last, C) + O     (C_last: the last bucket's own share, which
                 cannot start before backward ends)
and the speed-up of netsum over gloo that the network alone predicts is the ratio of the two
"with overlap" times for the same F, B, O -- 2(n-1)/n x framing when communication dominates,
falling toward 1 as compute (the batch) grows.

"With overlap" lets every bucket but the last start with backward: a bound.  A bucket cannot
leave before backward has produced it, so a third form, `ready`, hands bucket i (in the order
DDP hands them over) to the link at F + B x (values in buckets 1..i) / (all values) --
backward producing gradients at a steady rate per value -- and the link serves them in order:
  ready          F + max(B, end of the last bucket) + O
between the other two; with one big bucket ready late (an MLP's) it is nearly "no overlap".
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from netsum.experiments.points import ACK_FRAME, TCP_FRAME, TCP_MSS, ina_frame_bytes

__all__ = ["Prediction", "wire_bytes", "predict", "FIELDS", "row_of", "pair_rows",
           "PAIR_FIELDS", "window", "slot_uses", "WARMUP", "TTA_FIELDS", "time_to_accuracy",
           "ready_step"]

#: Steps left out of the medians: step 1 reduces every gradient as one bucket, step 2 runs
#: DDP's rebuilt buckets for the first time, step 3 still warms caches.
WARMUP = 3
_TCP = TCP_FRAME / TCP_MSS * (1 + ACK_FRAME / (2 * TCP_FRAME))


@dataclass(frozen=True, slots=True)
class Prediction:
    wire_bytes: float        # per link, each way, per step
    comm_s: float            # wire_bytes over the link rate
    overlap_s: float         # the step with communication overlapping backward
    serial_s: float          # the step with none
    ready_s: float = float("nan")   # each bucket sent once backward has produced it


def _blocks(numel: int, k: int) -> int:
    return -(-numel // k)


def _bucket_bytes(comm: str, numel: int, n: int, k: int, window: int) -> float:
    if comm.startswith("netsum"):
        b = _blocks(numel, k)
        return (b + min(window, b)) * ina_frame_bytes(k)
    if comm == "gloo":
        return 2 * (n - 1) / n * 4 * numel * _TCP if n > 1 else 0.0
    raise ValueError(f"no wire model for {comm!r}")


def wire_bytes(comm: str, numels: Sequence[int], n: int, k: int, window: int) -> float:
    """Bytes per link each way for one step whose buckets hold `numels` values."""
    return sum(_bucket_bytes(comm, e, n, k, window) for e in numels)


def predict(comm: str, numels: Sequence[int], n: int, k: int, window: int, bw_mbps: float,
            forward: float, backward: float, optimizer: float) -> Prediction:
    """The step time the link-rate model gives (module docstring); nan when unshaped."""
    total = wire_bytes(comm, numels, n, k, window)
    if not bw_mbps or not numels:
        nan = float("nan")
        return Prediction(total, nan, nan, nan)
    rate = bw_mbps * 1e6 / 8
    c = total / rate
    last = _bucket_bytes(comm, numels[-1], n, k, window) / rate
    # `ready`: bucket i leaves at its share of backward, after the buckets before it.
    done, free, values = 0, 0.0, sum(numels)
    for e in numels:
        done += e
        free = max(free, backward * done / values) + _bucket_bytes(comm, e, n, k, window) / rate
    return Prediction(total, c, forward + max(backward + last, c) + optimizer,
                      forward + backward + c + optimizer,
                      forward + max(backward, free) + optimizer)


def slot_uses(steps: Sequence[Mapping[str, Any]], k: int, window: int,
              totals: Mapping[str, Any] | None = None) -> int:
    """Slot uses of the switch over a run: each bucket's blocks plus its exponent agreement.
    `totals`: the rank's lane engine totals (the metrics' "packets"): with speculative
    exponents a bucket has no bootstrap round once predicted, and a block whose prediction
    missed is sent once more, so the agreement's uses are its counted bootstrap uses and
    misses (the same on every rank: the maxima and predictions are).  Without them, one
    bootstrap use per slot of every bucket (NETSUM_SPECULATE=0, or an older run's metrics)."""
    blocks = [_blocks(e, k) for row in steps for e in row.get("bucket_numels", [])]
    if totals and "bootstrap" in totals and "misses" in totals:
        return sum(blocks) + int(totals["bootstrap"]) + int(totals["misses"])
    return sum(b + min(window, b) for b in blocks)


def _med(values: Sequence[float]) -> float:
    v = [x for x in values if isinstance(x, (int, float)) and not math.isnan(x)]
    return statistics.median(v) if v else float("nan")


def window(steps: Sequence[Mapping[str, Any]], skip: int = WARMUP) -> tuple[float, float, int]:
    """(first wall-clock time, last, number of steps) of the measured steps."""
    m = list(steps[skip:])
    if not m:
        return float("nan"), float("nan"), 0
    return float(m[0]["t_wall"]), float(m[-1]["t_wall"]) + float(m[-1]["wall_s"]), len(m)


def _link_bytes(telemetry: Any, t0: float, t1: float) -> tuple[float, float, float]:
    """Mean over host links of the tx and rx bytes of the host's interface between the
    samples nearest to wall-clock times t0 and t1, and the time between those samples."""
    nan = float("nan")
    samples = telemetry.samples
    if len(samples) < 2 or math.isnan(t0):
        return nan, nan, nan
    walls = [telemetry.wall0 + s.t for s in samples]
    i = min(range(len(walls)), key=lambda j: abs(walls[j] - t0))
    j = min(range(len(walls)), key=lambda j: abs(walls[j] - t1))
    if j <= i:
        return nan, nan, nan
    a, b = samples[i].interfaces, samples[j].interfaces
    hosts = [key for key in b if key[0].startswith("h") and key in a]
    if not hosts:
        return nan, nan, nan
    tx = statistics.mean(b[h].tx_bytes - a[h].tx_bytes for h in hosts)
    rx = statistics.mean(b[h].rx_bytes - a[h].rx_bytes for h in hosts)
    return tx, rx, walls[j] - walls[i]


#: One row per training run (variant x point x repetition).
FIELDS = (
    "run", "topo", "workers", "bw_mbps", "loss", "model", "params", "data", "batch", "comm",
    "rep", "steps", "ok", "error", "step_s", "step_mean_s", "forward_s", "backward_s",
    "optimizer_s", "exposed_s", "hidden_s", "comm_busy_s", "buckets", "grad_bytes",
    "model_wire_bytes", "model_comm_s", "model_overlap_s", "model_serial_s",
    "bucket_numels", "window", "link_tx_bytes_step", "link_rx_bytes_step", "link_util",
    "final_test_accuracy",
    "final_loss", "train_s", "data_in", "retx", "results_out", "slot_uses",
    "root_new_per_chunk", "leaf_new_per_chunk", "switch_cpu_s", "load_start", "load_end",
    "wall_s",
)


def row_of(run_id: str, point: Mapping[str, Any], rep: int, run: Any, k: int) -> dict[str, Any]:
    """A CSV row from a TrainRun (netsum/experiments/trainbed.py) of `point` (topo, workers,
    bw_mbps, loss, model, data, batch)."""
    m = run.metrics
    steps = m.get("steps_log", []) or []
    meas = steps[WARMUP:]
    col = (lambda key: [float(s[key]) for s in meas if key in s])
    fwd, bwd, opt = _med(col("forward_s")), _med(col("backward_s")), _med(col("optimizer_s"))
    numels = list(meas[-1].get("bucket_numels", [])) if meas else []
    lanes = int(m.get("lanes", 4) or 4)
    win = int(m.get("slots", 256) or 256) // lanes
    n = int(point["workers"])
    bw = float(point["bw_mbps"])
    pred = predict(run.comm, numels, n, k, win, bw, fwd, bwd, opt)
    t0, t1, count = window(steps)
    tx, rx, span = _link_bytes(run.telemetry, t0, t1)
    # Steps in the sampled span (the samples nearest the window's ends bound it).
    per_step = count / (t1 - t0) * span if count and span == span and t1 > t0 else float("nan")
    uses = slot_uses(steps, k, win, m.get("packets")) if run.comm.startswith("netsum") else 0
    roots = [r for r in run.p4 if r.get("role") == "root"]
    leaves = [r for r in run.p4 if r.get("role") == "leaf"]
    new = (lambda rows: sum(int(r.get("data_in", 0)) - int(r.get("retx", 0))
                            for r in rows))
    mine = leaves or roots       # where the workers' packets arrive
    params = int(m.get("params", 0) or 0)
    return {
        "run": run_id, **{key: point[key] for key in ("topo", "workers", "bw_mbps", "loss",
                                                      "model", "data", "batch")},
        "params": params, "comm": run.comm, "rep": rep, "steps": len(steps), "ok": run.ok,
        "error": run.error[:200], "step_s": _med(col("wall_s")),
        "step_mean_s": statistics.mean(col("wall_s")) if meas else float("nan"),
        "forward_s": fwd, "backward_s": bwd, "optimizer_s": opt,
        "exposed_s": _med(col("exposed_s")), "hidden_s": _med(col("hidden_s")),
        "comm_busy_s": _med(col("comm_s")), "buckets": len(numels), "grad_bytes": 4 * params,
        "model_wire_bytes": pred.wire_bytes, "model_comm_s": pred.comm_s,
        "model_overlap_s": pred.overlap_s, "model_serial_s": pred.serial_s,
        "bucket_numels": ";".join(map(str, numels)), "window": win,
        # Bytes per step over the measured steps, scaled from the sampled span to the steps'.
        "link_tx_bytes_step": tx / per_step if per_step == per_step and per_step else float("nan"),
        "link_rx_bytes_step": rx / per_step if per_step == per_step and per_step else float("nan"),
        "link_util": (max(tx, rx) / span / (bw * 1e6 / 8)
                      if bw and span == span and span else float("nan")),
        "final_test_accuracy": m.get("final_test_accuracy", float("nan")),
        "final_loss": m.get("final_loss", float("nan")),
        "train_s": float(steps[-1]["train_s"]) if steps else float("nan"),
        "data_in": sum(int(r.get("data_in", 0)) for r in mine),
        "retx": sum(int(r.get("retx", 0)) for r in mine),
        "results_out": sum(int(r.get("results_out", 0)) for r in mine),
        "slot_uses": uses,
        "root_new_per_chunk": new(roots) / uses if uses and leaves else float("nan"),
        "leaf_new_per_chunk": (new(leaves) / len({r.get("switch") for r in leaves}) / uses
                               if uses and leaves else float("nan")),
        "switch_cpu_s": run.switch_cpu_s, "load_start": run.load_avg[0],
        "load_end": run.load_avg[1], "wall_s": run.wall_s,
    }


#: One row per point and repetition: each netsum variant against gloo of the same repetition.
PAIR_FIELDS = ("topo", "workers", "bw_mbps", "loss", "model", "batch", "rep", "comm",
               "step_s", "gloo_step_s", "speedup", "model_speedup", "serial_model_speedup",
               "ready_model_speedup", "of_model", "of_ready_model", "load")


def pair_rows(rows: Sequence[Mapping[str, Any]], k: int) -> list[dict[str, Any]]:
    """Measured speed-up (gloo's median step over the variant's) next to the model's (with
    overlap, ready, no overlap), all from gloo's compute split and buckets (in the order gloo's
    DDP handed them over) of the same repetition: the network alone changes."""
    key = ("topo", "workers", "bw_mbps", "loss", "model", "batch", "rep")
    gloo = {tuple(r[c] for c in key): r for r in rows if r["comm"] == "gloo" and _ok(r)}
    out = []
    for r in rows:
        g = gloo.get(tuple(r[c] for c in key))
        if r["comm"] == "gloo" or g is None or not _ok(r):
            continue
        n, bw = int(r["workers"]), float(r["bw_mbps"])
        numels = _numels(g)         # the same DDP buckets; the backend traces none
        split = (float(g["forward_s"]), float(g["backward_s"]), float(g["optimizer_s"]))
        lanes_win = int(r.get("window") or 64)
        mi = predict(str(r["comm"]), numels, n, k, lanes_win, bw, *split)
        mg = predict("gloo", numels, n, k, lanes_win, bw, *split)
        measured = float(g["step_s"]) / float(r["step_s"])
        model = mg.overlap_s / mi.overlap_s
        out.append({**{c: r[c] for c in key}, "comm": r["comm"], "step_s": r["step_s"],
                    "gloo_step_s": g["step_s"], "speedup": measured, "model_speedup": model,
                    "serial_model_speedup": mg.serial_s / mi.serial_s,
                    "ready_model_speedup": mg.ready_s / mi.ready_s,
                    "of_model": measured / model,
                    "of_ready_model": measured / (mg.ready_s / mi.ready_s),
                    "load": (float(r["load_start"]) + float(g["load_start"])) / 2})
    return out


#: One row per run that evaluated during training: when it reached gloo's final accuracy.
TTA_FIELDS = ("run", "comm", "workers", "bw_mbps", "model", "batch", "rep", "target_accuracy",
              "final_test_accuracy", "reached_step", "reached_train_s", "gloo_reached_train_s",
              "time_ratio", "accuracy_diff_pp")


def time_to_accuracy(rows: Sequence[Mapping[str, Any]],
                     steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For every run with evaluations: the training time at its first evaluation at or above
    the final test accuracy of gloo's run of the same point and repetition (the target), that
    time over gloo's own, and the final accuracies' difference in percentage points."""
    evals: dict[str, list[tuple[int, float, float]]] = {}
    for s in steps:
        acc = s.get("test_accuracy")
        if acc in ("", None):
            continue
        evals.setdefault(str(s["run"]), []).append((int(s["step"]), float(s["train_s"]),
                                                     float(acc)))
    key = ("topo", "workers", "bw_mbps", "loss", "model", "batch", "rep")
    gloo = {tuple(r[c] for c in key): r for r in rows if r["comm"] == "gloo" and _ok(r)}
    out = []
    for r in rows:
        g = gloo.get(tuple(r[c] for c in key))
        mine = sorted(evals.get(str(r["run"]), []))
        if g is None or len(mine) < 2 or not _ok(r):
            continue
        target = float(g["final_test_accuracy"])

        def reached(ev: list[tuple[int, float, float]]) -> tuple[int, float]:
            # CSV files keep 6 significant digits: the target read back may be rounded up
            # past the very evaluation it came from (accuracies step by 1/test-set size).
            return next(((st, t) for st, t, a in ev if a >= target - 1e-6), (0, float("nan")))
        step, t = reached(mine)
        _, tg = reached(sorted(evals.get(str(g["run"]), [])))
        out.append({"run": r["run"], "comm": r["comm"], **{c: r[c] for c in key[1:]},
                    "target_accuracy": target,
                    "final_test_accuracy": r["final_test_accuracy"], "reached_step": step,
                    "reached_train_s": t, "gloo_reached_train_s": tg,
                    "time_ratio": t / tg if tg == tg and tg else float("nan"),
                    "accuracy_diff_pp": 100 * (float(r["final_test_accuracy"]) - target)})
    return out


def ready_step(r: Mapping[str, Any], k: int) -> float:
    """The `ready` model's step time (module docstring) for a results.csv row."""
    return predict(str(r["comm"]), _numels(r), int(float(r["workers"])), k,
                   int(float(r.get("window") or 64)), float(r["bw_mbps"]), float(r["forward_s"]),
                   float(r["backward_s"]), float(r["optimizer_s"])).ready_s


def _ok(r: Mapping[str, Any]) -> bool:
    return str(r.get("ok")) in ("True", "true", "1")


def _numels(r: Mapping[str, Any]) -> list[int]:
    text = str(r.get("bucket_numels", ""))
    return [int(x) for x in text.split(";") if x]
