"""Experiment tooling without Mininet: interface counters and the sampler (netsum.experiments.telemetry),
counter rates of `netsum-ctl stats --watch` (controller.render.with_rates), sweep points,
theory, CSV rows and summaries (netsum.experiments.points), and the plots (netsum.experiments.plots)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netsum.controller.render import with_rates
from netsum.experiments import plots as expplots
from netsum.experiments.points import (FIELDS, NetKey, Point, expand, read_csv, row_of, summarize,
                          theory_time, write_csv)
from netsum.experiments.telemetry import IfCounters, Interface, Sampler, Telemetry, read_net_dev
from netsum.wire import packet_bytes

# /proc/net/dev as the kernel writes it (two header lines, then one line per interface).
NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo\
 colls carrier compressed
    lo:    {lo_rx}      10    0    0    0     0          0         0     {lo_tx}      10    0\
    0    0     0       0          0
h1-eth0: {rx} {rxp} 0 {rxd} 0 0 0 0 {tx} {txp} 0 {txd} 0 0 0 0
"""


def _net_dev(path: Path, rx: int, tx: int, rxp: int = 1, txp: int = 2) -> None:
    path.write_text(NET_DEV.format(lo_rx=5, lo_tx=6, rx=rx, rxp=rxp, rxd=3, tx=tx, txp=txp,
                                   txd=4))


def test_read_net_dev_columns(tmp_path: Path) -> None:
    f = tmp_path / "dev"
    _net_dev(f, rx=1000, tx=2000, rxp=7, txp=9)
    got = read_net_dev(f)
    assert got["h1-eth0"] == IfCounters(rx_bytes=1000, rx_packets=7, rx_dropped=3,
                                        tx_bytes=2000, tx_packets=9, tx_dropped=4)
    assert got["lo"].rx_bytes == 5 and got["lo"].tx_bytes == 6
    assert "lo" in read_net_dev()           # this process's namespace, for real


def test_sampler_rates_totals_and_rows(tmp_path: Path) -> None:
    f = tmp_path / "dev"
    _net_dev(f, rx=0, tx=0)
    now = [100.0]
    rows_p4 = [{"job": 1, "switch": "s1", "role": "single", "data_in": 5}]
    s = Sampler([Interface("h1", "h1-eth0", str(f), "h1-s1"),
                 Interface("h1", "gone0", str(f))], interval=1000,
                p4=lambda: rows_p4, p4_interval=1000, clock=lambda: now[0])
    s.start()
    # The thread sleeps (interval 1000 s); drive the samples by hand.
    for t, tx in ((101.0, 1_000_000), (103.0, 5_000_000)):
        now[0] = t
        _net_dev(f, rx=tx // 2, tx=tx)
        s._sample(with_p4=False)
    now[0] = 104.0
    tel = s.stop()
    assert [x.t for x in tel.samples] == [0.0, 1.0, 3.0, 4.0]
    assert tel.rates("h1", "h1-eth0") == [(0.5, 1e6), (2.0, 2e6), (3.5, 0.0)]
    assert tel.totals()[("h1", "h1-eth0")].tx_bytes == 5_000_000
    assert ("h1", "gone0") not in tel.totals()              # missing interfaces are skipped
    assert tel.last_p4() == tuple(rows_p4)
    rows = tel.rows("r1", origin=tel.wall0 + 1.0)
    tx = [(r[1], r[6]) for r in rows if r[2] == "iface" and r[5] == "tx_bytes"]
    assert tx == [(-1.0, 0), (0.0, 1_000_000), (2.0, 5_000_000), (3.0, 5_000_000)]
    assert ("r1", -1.0, "p4", "s1", "job1", "data_in", 5) in rows
    assert tel.errors == []


def test_sampler_records_failing_p4_and_keeps_going(tmp_path: Path) -> None:
    f = tmp_path / "dev"
    _net_dev(f, rx=0, tx=0)

    def broken() -> list[dict[str, object]]:
        raise ConnectionError("switch restarting")
    with Sampler([Interface("h1", "h1-eth0", str(f))], interval=0.01, p4=broken,
                 p4_interval=0.01) as s:
        time.sleep(0.1)
    assert len(s.telemetry.samples) >= 3
    assert s.telemetry.errors and "switch restarting" in s.telemetry.errors[0]


def test_with_rates() -> None:
    first = [{"job": 1, "switch": "s1", "data_in": 100}]
    assert with_rates(first, None, 1.0, ["job", "switch"], ["data_in"])[0]["data_in/s"] == ""
    second = [{"job": 1, "switch": "s1", "data_in": 400}, {"job": 2, "switch": "s1",
                                                            "data_in": 9}]
    got = with_rates(second, first, 2.0, ["job", "switch"], ["data_in"])
    assert [r["data_in/s"] for r in got] == [150.0, ""]
    # A counter that went down (switch restarted): no rate rather than a negative one.
    assert with_rates(first, second, 1.0, ["job", "switch"], ["data_in"])[0]["data_in/s"] == ""


def test_theory_by_hand() -> None:
    # INA: 1000 elements, K=32 -> 32 blocks + 32 bootstrap uses, each one frame.
    assert theory_time("ina", 4, 1000, 32, 8.0) == pytest.approx(64 * packet_bytes(32) / 1e6)
    # ring: 2(n-1)/n of 4000 bytes in 1514-byte frames per 1448 bytes, plus an ACK per two.
    tcp = 1514 / 1448 * (1 + 66 / 3028)
    assert theory_time("ring", 4, 1000, 32, 8.0) == pytest.approx(1.5 * 4000 * tcp / 1e6)
    assert theory_time("ps", 4, 1000, 32, 8.0) == pytest.approx(3 * 4000 * tcp / 1e6)
    assert np.isnan(theory_time("ring", 4, 1000, 32, None))


def test_expand_groups_points_by_network() -> None:
    pts = expand([2, 4], [100, 200], [10.0], [0.0, 0.1], [32], ["single", "tree"],
                 ["embedded"])
    assert len(pts) == 2 * 2 * 2 * 2
    nets = [p.net for p in pts]
    # Each network's points are contiguous (it is built once).
    starts = [n for i, n in enumerate(nets) if i == 0 or nets[i - 1] != n]
    assert starts == list(dict.fromkeys(nets))
    assert NetKey("tree", "embedded", 2, 10.0, 32) in nets


@dataclass
class _W:
    elapsed_s: float
    packets_sent: int = 100
    retransmissions: int = 5
    error_ratio: float = 0.5
    error: str = ""


@dataclass
class _Out:
    workers: tuple[_W, ...]
    ok: bool = True
    wall_s: float = 3.0


@dataclass
class _Run:
    algo: str
    outcome: _Out
    late_s: list[float]
    telemetry: Telemetry
    latencies: list[np.ndarray]
    injected_drops: int = 7
    switch_cpu_s: float = 1.5
    load_avg: float = 2.0
    p4: list[dict[str, object]] = field(default_factory=list)

    @property
    def time_s(self) -> float:
        return max(late + w.elapsed_s for late, w in zip(self.late_s, self.outcome.workers))


def _fake_run(algo: str, elapsed: float) -> _Run:
    ifs = (Interface("h1", "h1-eth0", "x", "h1-s1"), Interface("s1", "s1-eth1", "x", "h1-s1"))
    tel = Telemetry(ifs)
    from netsum.experiments.telemetry import Sample
    tel.samples = [Sample(0.0, {("h1", "h1-eth0"): IfCounters()}),
                   Sample(1.0, {("h1", "h1-eth0"): IfCounters(tx_bytes=1_250_000,
                                                              rx_bytes=625_000)})]
    p4 = [{"job": 1, "switch": "root", "role": "root", "data_in": 266, "retx": 10},
          {"job": 1, "switch": "leaf1", "role": "leaf", "data_in": 262, "retx": 6},
          {"job": 1, "switch": "leaf2", "role": "leaf", "data_in": 256, "retx": 0}]
    return _Run(algo, _Out((_W(elapsed), _W(elapsed / 2))), [0.0, 0.25], tel,
                [np.array([0.001, 0.002]), np.array([0.003])], p4=p4 if algo == "ina" else [])


def test_row_of_fields() -> None:
    point = Point(NetKey("tree", "embedded", 2, 10.0, 32), 2048, 0.0)
    row = row_of("r0", point, 0, _fake_run("ina", 1.0), slots=64)
    assert set(row) == set(FIELDS)
    assert row["time_s"] == 1.0 and row["retransmissions"] == 10 and row["packets_sent"] == 200
    # goodput per worker: 32 * 2048 bits over (late + elapsed): 1.0 s and 0.75 s
    assert row["goodput_min_mbps"] == pytest.approx(0.065536)
    assert row["goodput_max_mbps"] == pytest.approx(0.065536 / 0.75)
    # 1.25 MB in 1 s on a 10 Mb/s link: fully used
    assert row["link_util_mean"] == pytest.approx(1.0)
    # 2048 / 32 = 64 blocks + 64 bootstrap uses = 128: the root counted 266 data packets,
    # 10 of them retransmitted -> 256 = one contribution per leaf per use; each leaf one
    # worker's and the root's result per use (plus its retransmissions).
    assert row["root_in_per_chunk"] == pytest.approx(266 / 128)
    assert row["leaf_in_per_chunk"] == pytest.approx(259 / 128)
    assert row["root_new_per_chunk"] == 2.0 and row["leaf_new_per_chunk"] == 2.0
    assert row["data_in"] == 518 and row["switch_retx"] == 6   # summed over the leaves only
    assert row["latency_p50_ms"] == pytest.approx(2.0)


def test_summarize_and_csv_round_trip(tmp_path: Path) -> None:
    point = Point(NetKey("single", "embedded", 2, 10.0, 32), 2048, 0.0)
    rows = [row_of(f"r{i}", point, i, _fake_run("ring", t)) for i, t in enumerate((1, 3, 2))]
    rows.append({**rows[0], "ok": False, "time_s": 99.0})
    write_csv(tmp_path / "r.csv", rows)
    back = read_csv(tmp_path / "r.csv")
    assert back[0]["workers"] == 2 and back[0]["topo"] == "single"
    (s,) = summarize(back)
    assert (s["n"], s["median"], s["min"], s["max"]) == (3, 2.0, 1.0, 3.0)


@pytest.mark.slow
def test_plots_are_written_with_data_and_without(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = []
    for n in (2, 4):
        for size in (1024, 4096):
            for loss in (0.0, 0.05):
                for algo, t in (("ina", 1.0), ("ring", 1.4)):
                    point = Point(NetKey("single", "embedded", n, 10.0, 32), size, loss)
                    rows.append(row_of(f"{n}{size}{loss}{algo}", point, 0,
                                       _fake_run(algo, t * size / 1024 * (1 + loss))))
    quant = expplots.latency_quantile_rows("ina n=2", "ina", [0.001, 0.002, 0.004])
    assert quant[0]["latency_ms"] == pytest.approx(1.0) and quant[-1]["q"] == 1.0
    tel = [("r", t, "iface", "h1", "h1-eth0", "tx_bytes", v)
           for t, v in ((0.0, 0), (1.0, 625_000), (2.0, 1_875_000))]
    series = expplots.utilisation_series(
        [dict(zip(("run", "t_s", "source", "node", "item", "metric", "value"), r))
         for r in tel], "r", 10.0)
    assert series == [(0.5, "h1 up", 0.5), (1.5, "h1 up", 1.0)]
    full = tmp_path / "full"
    empty = tmp_path / "empty"
    full.mkdir()
    empty.mkdir()
    for out, args in ((full, (rows, quant, {"ina run": series})), (empty, ([], [], {}))):
        paths = expplots.write_all(out, *args, 10.0)
        assert [p.name for p in paths] == list(expplots.PLOTS)
        for p in paths:
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


@pytest.mark.slow
def test_plots_redrawn_from_a_sweep_directory(tmp_path: Path) -> None:
    """`python -m netsum.experiments.plots DIR` reads results.csv, latency_quantiles.csv and
    telemetry.csv.gz and redraws every plot; the utilisation plot shows the chosen run."""
    import csv
    import gzip
    rows = []
    for n in (2, 4):
        for algo in ("ina", "ring"):
            point = Point(NetKey("single", "embedded", n, 10.0, 32), 4096, 0.0)
            rows.append(row_of(f"n{n}-{algo}", point, 0, _fake_run(algo, 1.0)))
    assert {a: r["run"] for a, r in expplots.pick_utilisation_runs(rows).items()} == {
        "ina": "n4-ina", "ring": "n4-ring"}
    write_csv(tmp_path / "results.csv", rows)
    write_csv(tmp_path / "latency_quantiles.csv",
              expplots.latency_quantile_rows("ina n=2", "ina", [0.001, 0.003]),
              ("label", "algo", "q", "latency_ms"))
    with gzip.open(tmp_path / "telemetry.csv.gz", "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(expplots.TELEMETRY_COLUMNS)
        for run in ("n4-ina", "n4-ring"):
            for t, v in ((0.0, 0), (0.5, 300_000), (1.0, 600_000)):
                w.writerow((run, t, "iface", "h1", "h1-eth0", "tx_bytes", v))
    assert expplots.main([str(tmp_path)]) == 0
    for name in expplots.PLOTS:
        assert (tmp_path / name).stat().st_size > 5000
    assert expplots.main([str(tmp_path / "nothing")]) == 1
