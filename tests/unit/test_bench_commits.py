"""benchmarks/commits.py's pure parts: a benchmark's printed output -> figures, and the verdict.

The inputs are lines in the formats allreduce.py, switch_pps.py and compile_time.py print
(written out by hand from their format strings); every expected figure below is read off those
lines by hand.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "commits.py"


def _load() -> ModuleType:
    # A benchmark script, not a package module: loaded from its file (no sys.path edit).
    spec = importlib.util.spec_from_file_location("bench_commits", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod           # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


bc = _load()

ALLREDUCE_OUT = """\
all-reduce of 65536 float32 elements; ceiling from a bare recv->send loop over UDP on 127.0.0.1 (1 s per point); medians of 1 runs; workers start together; load average 7.9 on 2 cores
native module for K=256 ready (0.4 s)
     path  mode workers   K      goodput   per-worker   retx  bare fwd/s      ceiling  ratio cpu: switch workers us/pkt: switch worker  ok
 native/c   udp       4 256     2.345 M/s     2.501 M/s      3      41,250     2.640 M/s   0.89        87 %   190 %            5.9   13.2  yes
   python   udp       2  32     0.512 M/s     0.530 M/s      0      52,000     0.832 M/s   0.62        99 %   120 %           21.4    9.8  yes
"""


def test_allreduce_rows_become_figures() -> None:
    figs = {f.name: f for f in bc.parse_allreduce(ALLREDUCE_OUT)}
    assert len(figs) == 12                  # 6 per row, the prelude and header lines skipped
    p = "native/c udp 4 workers K=256"
    assert figs[f"{p}: goodput"].value == 2.345
    assert figs[f"{p}: goodput"].higher is True
    assert figs[f"{p}: per-worker goodput"].value == 2.501
    assert figs[f"{p}: switch CPU per contribution"].value == 5.9
    assert figs[f"{p}: switch CPU per contribution"].higher is False
    assert figs[f"{p}: workers' CPU per packet"].value == 13.2
    assert figs[f"{p}: retransmissions"].value == 3
    assert figs["4 senders K=256: bare loop (no netsum code)"].value == 41250
    assert figs["python udp 2 workers K=32: goodput"].value == 0.512
    assert figs["2 senders K=32: bare loop (no netsum code)"].value == 52000


def test_allreduce_row_without_path_column_and_failed_row() -> None:
    # trees from before the native switch path print no path column
    old = "      udp       4  64     1.000 M/s     1.100 M/s      0      40,000     0.640 M/s   " \
          "1.56        90 %   150 %           10.0   12.0  yes"
    assert {f.name: f.value for f in bc.parse_allreduce(old)}["udp 4 workers K=64: goodput"] == 1.0
    with pytest.raises(ValueError, match="failed"):
        bc.parse_allreduce(old.replace("yes", "NO"))


SWITCH_PPS_OUT = """\
switch_pps: K=32,256, 4 multicast replicas, 1.0s per run; load average 8.1 on 2 cores
  in-process  ipv4 router                           123,456 pkt/s in  (1 out per packet)
  in-process  aggregation (stand-in, K=32)           45,678 pkt/s in  (4 out per packet)
  in-process  netsum.p4 K=256 (native | python | fuse=False): 250,000 | 40,000 | 10,000 contributions per CPU-s; 4.00 | 25.00 | 100.00 us CPU per contribution; x25.0 | 4.0 | 1.0 of fuse=False
  udp ports   ipv4 router                            20,000 pkt/s in  | bare recv->send loop     60,000 pkt/s | ratio  0.33
  udp ports   netsum.p4 K=32, job of 4           C loop    90,000 | Python loop    50,000 contributions/s (x1.80); switch CPU 8.50 | 15.30 us per contribution (x1.80 less)
"""


def test_switch_pps_lines_become_figures() -> None:
    figs = {f.name: f for f in bc.parse_switch_pps(SWITCH_PPS_OUT)}
    assert {n: f.value for n, f in figs.items()} == {
        "in-process ipv4 router": 123456,
        "in-process aggregation (stand-in, K=32)": 45678,
        "in-process netsum.p4 K=256, native": 250000,
        "in-process netsum.p4 K=256, python": 40000,
        "in-process netsum.p4 K=256, fuse=False": 10000,
        "udp ports ipv4 router": 20000,
        "udp ports ipv4 router: bare loop (no netsum code)": 60000,
        "udp ports netsum.p4 K=32, job of 4, C loop": 90000,
        "udp ports netsum.p4 K=32, job of 4, Python loop": 50000,
        "udp ports netsum.p4 K=32, job of 4, C loop: switch CPU": 8.5,
        "udp ports netsum.p4 K=32, job of 4, Python loop: switch CPU": 15.3,
    }
    assert figs["in-process netsum.p4 K=256, native"].higher is True
    assert figs["udp ports netsum.p4 K=32, job of 4, C loop: switch CPU"].higher is False


def test_verdict_from_two_samples() -> None:
    assert bc.verdict([10, 12, 14], [13, 15, 16], True) == "within noise"   # ranges overlap
    assert bc.verdict([10, 12, 14], [14, 15], True) == "within noise"       # they touch
    assert bc.verdict([10, 12, 14], [15, 16, 17], True) == "new better"     # all above, rate
    assert bc.verdict([10, 12, 14], [15, 16, 17], False) == "new worse"     # all above, cost
    assert bc.verdict([10, 12, 14], [7, 8, 9.9], True) == "new worse"
    assert bc.verdict([10, 12, 14], [7, 8, 9.9], False) == "new better"
    assert bc.verdict([10, 12], [], True) == "missing"
    assert bc.verdict([10], [15, 16], True) == "too few runs"               # no range to judge


def test_compare_pairs_figures_by_name() -> None:
    F = bc.Figure
    old = [[F("a", 10.0, "pkt/s", True), F("gone", 1.0, "", True)], [F("a", 14.0, "pkt/s", True)],
           [F("a", 12.0, "pkt/s", True)]]
    new = [[F("a", 16.0, "pkt/s", True)], [F("a", 15.0, "pkt/s", True)],
           [F("a", 18.0, "pkt/s", True), F("added", 2.0, "", False)]]
    rows = {r.name: r for r in bc.compare(old, new)}
    assert rows["a"].old == (10.0, 14.0, 12.0) and rows["a"].new == (16.0, 15.0, 18.0)
    assert rows["a"].ratio == 16.0 / 12.0                   # medians 12 and 16
    assert rows["a"].verdict == "new better"
    assert rows["gone"].verdict == "missing" and rows["added"].verdict == "missing"
    text = bc.table(list(rows.values()))
    assert "| a | pkt/s (higher is better) | 12 | 16 | 1.333 | 10-14 | 15-18 | new better |" in text


VS_GLOO_OUT = """\
load average 7.5 on 2 CPUs; K=256; 1 s per point
ranks  elements    gloo ms     shm ms     udp ms  shm/gloo  udp/gloo   gloo M/s   shm M/s   udp M/s
    4         1      0.690      1.155      7.623      1.67     11.05     0.001     0.001     0.000
    4   1048576       30.5      249.0          -      8.16       nan    34.380     4.212       nan

CPU per call (µs; all ranks together / the switch daemon), and per packet a rank sent (netsum):
      shm n=4         1: ranks       3016  switch       200  packets/rank      2.0  per packet: ranks  376.0  switch  24.9  retx 1 (1 spurious)
      shm n=4   1048576: ranks     106973  switch     30000  packets/rank   4366.0  per packet: ranks    6.1  switch   1.7  retx 168 (52 spurious)

emulation capacity (shm, n=4, K=256, 1048576 elements): 0.539 Gb/s summed (135 Mb/s per worker)
"""


def test_vs_gloo_table_cpu_and_capacity_become_figures() -> None:
    figs = {f.name: f for f in bc.parse_vs_gloo(VS_GLOO_OUT)}
    assert figs["n=4 1 gloo: time"].value == 0.690
    assert figs["n=4 1 udp: time"].value == 7.623
    assert figs["n=4 1,048,576 shm: time"].value == 249.0
    assert "n=4 1,048,576 udp: time" not in figs                # '-': the point failed
    assert figs["n=4 1 udp/gloo"].value == 11.05
    assert figs["n=4 1,048,576 shm/gloo"].value == 8.16
    assert "n=4 1,048,576 udp/gloo" not in figs
    assert figs["n=4 1,048,576 shm: ranks' CPU per packet"].value == 6.1
    assert figs["capacity shm n=4 K=256"].value == 0.539
    assert figs["capacity shm n=4 K=256"].higher and not figs["n=4 1 shm/gloo"].higher
    assert len(figs) == 5 + 3 + 2 + 1


# compile_time.py's table (format strings: a 18-wide label, each pass name cut to 12 and
# right-aligned in 13, each median as "%11.1fms", then goal/total), written out by hand.
COMPILE_TIME_OUT = """\
program              Preprocess        Parse GenerateJson GenerateP4In        total  goal/total
netsum.p4 K=256          12.5ms      300.2ms      640.0ms       80.0ms     2255.0ms        0.9x
l2_mcast.p4               1.0ms        3.5ms        6.8ms        2.0ms       99.9ms       20.0x
"""


def test_compile_time_rows_become_lowering_and_total_figures() -> None:
    figs = {f.name: f for f in bc.parse_compile_time(COMPILE_TIME_OUT)}
    assert {n: f.value for n, f in figs.items()} == {
        "netsum.p4 K=256: GenerateJson": 640.0, "netsum.p4 K=256: total": 2255.0,
        "l2_mcast.p4: GenerateJson": 6.8, "l2_mcast.p4: total": 99.9}
    assert all(f.unit == "ms" and f.higher is False for f in figs.values())
