"""The training experiments' pure parts (netsum.experiments.trainpoints, trainplots): the
link-rate model of an iteration worked by hand, a run record turned into a CSV row (bytes per
step from interface samples, the P4 per-chunk figures), the speed-up pairs, and the plots."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from netsum.experiments import trainplots
from netsum.experiments.points import read_csv, write_csv
from netsum.experiments.telemetry import IfCounters, Interface, Sample, Telemetry
from netsum.experiments.trainpoints import (FIELDS, PAIR_FIELDS, pair_rows, predict, row_of,
                                            slot_uses, time_to_accuracy, wire_bytes)
from netsum.wire import HEADER_BYTES

FRAME_256 = 14 + 20 + 8 + HEADER_BYTES + 4 * 256        # Ethernet + IPv4 + UDP + netsum + K values
TCP = 1514 / 1448 * (1 + 66 / (2 * 1514))               # full segments plus an ACK per two


def test_wire_bytes_by_hand() -> None:
    # 1000 values = 4 blocks of 256; a window of 32 slots bootstraps min(32, 4) = 4 uses.
    assert wire_bytes("netsum-hook", [1000], 4, 256, 32) == 8 * FRAME_256
    # 100,000 values = 391 blocks; the window bootstraps 32 of them: 423 frames per link.
    assert wire_bytes("netsum-backend", [100_000], 8, 256, 32) == 423 * FRAME_256
    # The ring: 2(n-1)/n of the bytes, n = 4: 1.5 x 4000 bytes in TCP framing.
    assert wire_bytes("gloo", [1000], 4, 256, 32) == pytest.approx(6000 * TCP)
    assert wire_bytes("gloo", [600, 400], 2, 256, 32) == pytest.approx(4000 * TCP)
    with pytest.raises(ValueError):
        wire_bytes("ps", [1], 2, 256, 32)


def test_predict_overlap_and_serial_by_hand() -> None:
    # n = 2, 8 Mb/s = 1e6 B/s; two buckets of 250,000 values = 1e6 payload bytes each.
    b = 1e6 * TCP / 1e6                                  # seconds per bucket on the link
    p = predict("gloo", [250_000, 250_000], 2, 256, 32, 8.0, 0.1, 0.5, 0.05)
    assert p.comm_s == pytest.approx(2 * b)
    assert p.serial_s == pytest.approx(0.1 + 0.5 + 2 * b + 0.05)
    # Communication-bound: backward (0.5 s) + the last bucket (b) < both buckets (2b).
    assert p.overlap_s == pytest.approx(0.1 + 2 * b + 0.05)
    # Compute-bound: backward 3 s, then the last bucket alone.
    q = predict("gloo", [250_000, 250_000], 2, 256, 32, 8.0, 0.1, 3.0, 0.05)
    assert q.overlap_s == pytest.approx(0.1 + 3.0 + b + 0.05)
    # Ready: the first bucket leaves at half of backward (half the values), the second when
    # the link is free again; compute-bound, the second waits for backward's end.
    assert p.ready_s == pytest.approx(0.1 + 0.25 + 2 * b + 0.05)
    assert q.ready_s == pytest.approx(0.1 + 3.0 + b + 0.05)
    # One late big bucket: 3 of 4 values come at the end, so ready is near no overlap.
    r = predict("gloo", [62_500, 187_500], 2, 256, 32, 8.0, 0.1, 0.5, 0.05)
    assert r.ready_s == pytest.approx(0.1 + 0.5 + 0.75 * b + 0.05)
    assert math.isnan(predict("gloo", [10], 2, 256, 32, 0.0, 0, 0, 0).overlap_s)


def test_speedup_falls_toward_one_as_compute_grows() -> None:
    numels, n = [262_144] * 4, 4
    ratios = []
    for backward in (0.001, 0.5, 2.0, 8.0, 32.0):
        ring = predict("gloo", numels, n, 256, 32, 10.0, backward / 2, backward, 0.01)
        ina = predict("netsum-hook", numels, n, 256, 32, 10.0, backward / 2, backward, 0.01)
        ratios.append(ring.overlap_s / ina.overlap_s)
    assert ratios == sorted(ratios, reverse=True)
    # Communication-bound: 2(n-1)/n = 1.5 times the framing ratio (TCP's over netsum's with
    # one bootstrap per slot), ~1.47 here; compute-bound: within 2 % of 1.
    framing = TCP / (FRAME_256 / 1024 * (1024 + 32) / 1024)
    assert ratios[0] == pytest.approx(1.5 * framing, rel=0.02)
    assert 1.0 < ratios[-1] < 1.02


def test_slot_uses_counts_blocks_and_bootstraps() -> None:
    steps = [{"bucket_numels": [1000]}, {"bucket_numels": [100_000, 256]}, {}]
    assert slot_uses(steps, 256, 32) == (4 + 4) + (391 + 32) + (1 + 1)
    # speculative exponents: the engine's counted bootstrap uses and misses instead
    totals = {"packets": 999, "bootstrap": 5, "misses": 7, "predicted": 300}
    assert slot_uses(steps, 256, 32, totals) == (4 + 391 + 1) + 5 + 7


@dataclass
class FakeRun:
    comm: str
    metrics: dict[str, Any]
    telemetry: Telemetry
    p4: list[dict[str, object]] = field(default_factory=list)
    ok: bool = True
    error: str = ""
    switch_cpu_s: float = 1.0
    load_avg: tuple[float, float] = (2.0, 3.0)
    wall_s: float = 30.0


def _run(comm: str, step_s: float, p4: list[dict[str, object]] | None = None) -> FakeRun:
    """Ten steps of `step_s` from wall time 1000; each host sends 1000 bytes per step and
    receives 2000; interface samples every half step."""
    steps = [{"step": i + 1, "loss": 1.0, "wall_s": step_s, "forward_s": 0.01,
              "backward_s": 0.02, "optimizer_s": 0.005, "exposed_s": step_s - 0.035,
              "hidden_s": 0.0, "comm_s": step_s - 0.03, "t_wall": 1000 + i * step_s,
              "train_s": (i + 1) * step_s, "bucket_numels": [1000]} for i in range(10)]
    ifs = (Interface("h1", "h1-eth0", "x"), Interface("h2", "h2-eth0", "x"),
           Interface("s1", "s1-eth1", "y"))
    tel = Telemetry(ifs, wall0=1000.0)
    for j in range(21):
        t = j * step_s / 2
        c = IfCounters(rx_bytes=int(4000 * t / step_s), tx_bytes=int(2000 * t / step_s))
        tel.samples.append(Sample(t, {("h1", "h1-eth0"): c, ("h2", "h2-eth0"): c,
                                      ("s1", "s1-eth1"): IfCounters(tx_bytes=10**9)}))
    metrics = {"steps_log": steps, "params": 1000, "lanes": 4, "slots": 128,
               "final_test_accuracy": 0.9, "final_loss": 0.3}
    return FakeRun(comm, metrics, tel, p4 or [])


POINT = {"topo": "tree", "workers": 4, "bw_mbps": 1.0, "loss": 0.0, "model": "mlp",
         "data": "digits", "batch": 16}


def test_row_of_measures_bytes_per_step_and_chunks() -> None:
    uses = 10 * (4 + 4)
    p4 = [{"job": 1, "switch": "root", "role": "root", "data_in": 2 * uses + 7, "retx": 7},
          {"job": 1, "switch": "leaf1", "role": "leaf", "data_in": 3 * uses, "retx": 0},
          {"job": 1, "switch": "leaf2", "role": "leaf", "data_in": 3 * uses + 2, "retx": 2}]
    row = row_of("r", POINT, 0, _run("netsum-hook", 0.5, p4), 256)
    assert set(row) == set(FIELDS)
    assert row["link_tx_bytes_step"] == pytest.approx(2000)
    assert row["link_rx_bytes_step"] == pytest.approx(4000)
    # The busier direction: 4000 B per 0.5 s over 1 Mb/s = 125,000 B/s.
    assert row["link_util"] == pytest.approx(8000 / 125_000)
    assert row["slot_uses"] == uses
    assert row["root_new_per_chunk"] == pytest.approx(2.0)
    assert row["leaf_new_per_chunk"] == pytest.approx(3.0)
    assert row["step_s"] == 0.5 and row["buckets"] == 1 and row["window"] == 32
    assert row["model_wire_bytes"] == 8 * FRAME_256


def test_pairs_and_plots(tmp_path: Path) -> None:
    rows = []
    for batch, (g, i) in {16: (2.0, 1.5), 256: (2.2, 1.9), 1024: (3.0, 2.9)}.items():
        p = {**POINT, "topo": "single", "batch": batch}
        for rep in (0, 1):
            rows.append(row_of(f"g{batch}{rep}", p, rep, _run("gloo", g), 256))
            rows.append(row_of(f"i{batch}{rep}", p, rep, _run("netsum-hook", i), 256))
    pairs = pair_rows(rows, 256)
    assert len(pairs) == 6 and set(pairs[0]) == set(PAIR_FIELDS)
    assert pairs[0]["speedup"] == pytest.approx(2.0 / 1.5)
    assert pairs[0]["of_model"] == pytest.approx(pairs[0]["speedup"] / pairs[0]["model_speedup"])
    assert pairs[0]["of_ready_model"] == pytest.approx(
        pairs[0]["speedup"] / pairs[0]["ready_model_speedup"])
    write_csv(tmp_path / "results.csv", rows, FIELDS)
    write_csv(tmp_path / "pairs.csv", pairs, PAIR_FIELDS)
    (tmp_path / "steps.csv").write_text(
        "run,comm,step,loss,wall_s,train_s,t_wall,test_accuracy\n" + "".join(
            f"g160,gloo,{s},1.0,0.5,{s * 0.5},{1000 + s * 0.5},{0.1 * s if s % 2 == 0 else ''}\n"
            for s in range(1, 11)))
    assert len(read_csv(tmp_path / "pairs.csv")) == 6
    made = trainplots.write_all(tmp_path)
    assert {p.name for p in made} == {"speedup_vs_batch.png", "step_vs_batch.png",
                                      "time_to_accuracy.png"}
    assert all(p.stat().st_size > 10_000 for p in made)


def test_models_side_by_side_plot(tmp_path: Path) -> None:
    """One point, two models: only the per-model plot has an x axis to draw."""
    rows = [row_of(f"{c}{m}", {**POINT, "model": m}, 0, _run(c, t), 256)
            for m, (g, i) in {"mlp": (2.0, 1.5), "transformer": (6.0, 4.5)}.items()
            for c, t in (("gloo", g), ("netsum-hook", i))]
    write_csv(tmp_path / "results.csv", rows, FIELDS)
    made = trainplots.write_all(tmp_path)
    assert [p.name for p in made] == ["step_by_model.png"]
    assert made[0].stat().st_size > 10_000


def test_time_to_accuracy_against_gloos_final() -> None:
    p = {**POINT, "topo": "single"}
    g, i = _run("gloo", 1.0), _run("netsum-hook", 0.5)
    g.metrics["final_test_accuracy"] = 0.95
    i.metrics["final_test_accuracy"] = 0.955
    rows = [row_of("g", p, 0, g, 256), row_of("i", p, 0, i, 256)]
    # Both runs' evaluations reach 0.95 at step 8: gloo after 8 s, netsum after 4 s.
    acc = {2: 0.5, 4: 0.8, 6: 0.93, 8: 0.95, 10: 0.95}
    steps = [{"run": run, "step": s, "train_s": s * dt, "test_accuracy": acc.get(s, "")}
             for run, dt in (("g", 1.0), ("i", 0.5)) for s in range(1, 11)]
    out = {r["run"]: r for r in time_to_accuracy(rows, steps)}
    assert out["i"]["reached_step"] == 8 and out["i"]["reached_train_s"] == 4.0
    assert out["i"]["gloo_reached_train_s"] == 8.0 and out["i"]["time_ratio"] == 0.5
    assert out["i"]["accuracy_diff_pp"] == pytest.approx(0.5)
    assert out["g"]["time_ratio"] == 1.0


def test_time_to_accuracy_survives_the_csv_round_trip(tmp_path: Path) -> None:
    """results.csv keeps 6 significant digits: 349/359 = 0.97214484... is written 0.972145,
    above the evaluation it came from; the target must still count as reached (--redraw)."""
    p = {**POINT, "topo": "single"}
    g = _run("gloo", 1.0)
    g.metrics["final_test_accuracy"] = 349 / 359
    write_csv(tmp_path / "results.csv", [row_of("g", p, 0, g, 256)], FIELDS)
    steps = [{"run": "g", "step": s, "train_s": float(s), "test_accuracy": 349 / 359 if s >= 8
              else 0.5} for s in range(1, 11)]
    out = time_to_accuracy(read_csv(tmp_path / "results.csv"), steps)
    assert out[0]["reached_step"] == 8 and out[0]["time_ratio"] == 1.0
