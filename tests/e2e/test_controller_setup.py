"""A refused set-up changes nothing (issue 25, point 3): `netsum-ctl setup`, `run` and `topo show`
refuse a topology the program cannot hold -- job ids beyond its per-job counters, a host with
the service address, jobs that overflow a slot pool or the switch's, a thousand jobs -- with the
same one line, and a job that is running on the switch meanwhile keeps every entry, group and
register: the round it had half done completes with the exact sum afterwards.

On main 315630c `setup` pushed the pipeline (which empties every table and register) before
its job planner refused id 256, so the running job lost its entries and its half-done round."""
from __future__ import annotations

import copy
import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from test_controller_fabric import (data_frame, netsum_program, switches,  # noqa: F401
                                    topology, vec)
from netsum.controller import ops
from netsum.controller import program as P
from netsum.controller.cli import main
from netsum.controller.topology import parse_topology
from netsum.p4rt.client import Endpoint, SwitchClient
from netsum.p4rt.schema import Schema, load_p4info
from netsum.wire import K_DEFAULT, MsgType
from netsum.workers import wire

K = K_DEFAULT
#: Pushing a K=256 pipeline takes 2.5-3.6 s on a loaded 2-core machine: wait well beyond it.
TIMEOUT = "60"

Doc = dict[str, Any]


def _job(**fields: Any) -> Callable[[Doc], None]:
    return lambda d: d["jobs"].append(fields)


def _set(where: Callable[[Doc], dict[str, Any]], **fields: Any) -> Callable[[Doc], None]:
    return lambda d: where(d).update(fields)


#: (case, change to examples/single.yaml, the refusal every verb must print).
CASES: list[tuple[str, Callable[[Doc], None], str]] = [
    ("job id 256", _job(id=256, workers=["h3", "h4"], slots=16),
     "jobs[2] (job 256): job id 256 is out of range 1..255 (the program's per-job counters "
     "have 256 cells)"),
    ("job id 65535", _job(id=65535, workers=["h3", "h4"], slots=16),
     "jobs[2] (job 65535): job id 65535 is out of range 1..255"),
    ("host with the service IPv4", _set(lambda d: d["hosts"][2], ipv4="10.0.1.254"),
     "hosts[2].ipv4: 10.0.1.254 is the service address of switch s1"),
    ("host with the service MAC", _set(lambda d: d["hosts"][3], mac="02:00:00:00:01:00"),
     "hosts[3].mac: 02:00:00:00:01:00 is the service address of switch s1"),
    ("jobs beyond the pool", _job(id=3, workers=["h3", "h4"], slots=512),
     "jobs[2] (job 3): job 3 needs 512 contiguous slots on s1 but only 256 of 1024 are free"),
    ("pool beyond the program's", _set(lambda d: d["switches"][0], slots=5000),
     "switches[0].slots: 5000 is more than the program's pool of 4096 slots"),
    ("a thousand jobs", lambda d: d.update(jobs=[{"id": i, "workers": ["h1", "h2"], "slots": 1}
                                                  for i in range(1, 1001)]),
     "jobs[255] (job 256): job id 256 is out of range 1..255"),
]


def run_ctl(topo: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main([*argv, "--topo", str(topo), "--timeout", TIMEOUT], out, err)
    return rc, out.getvalue(), err.getvalue()


def state(addr: str, info: Path) -> tuple[list[Any], ...]:
    """Every table entry (with its direct counters), multicast group and nonzero counter cell
    the switch holds (a pipeline push zeroes the counters even where it re-creates entries)."""
    schema = Schema(load_p4info(info))
    client = SwitchClient(Endpoint(addr, 0, (0, 2)), 60)
    client.connect()
    try:
        entries = sorted((ops.read_entries(client, schema, t.name, with_counters=True)
                          for t in schema.tables), key=repr)
        cells = [ops.read_counter(client, schema, name) for _, name in P.JOB_COUNTERS]
        return entries, ops.read_groups(client), cells
    finally:
        client.close()


def run_verb_refuses(topo: Path, *argv: str) -> tuple[int, str, str]:
    """`netsum-ctl run` in a process of its own: one that accepted the file would never
    return."""
    try:
        got = subprocess.run([sys.executable, "-m", "netsum.ctl", "run", *argv, "--topo",
                              str(topo), "--timeout", TIMEOUT], capture_output=True, text=True,
                             timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`netsum-ctl run` accepted {topo.name} and kept running")
    return got.returncode, got.stdout, got.stderr


@pytest.mark.slow
def test_a_refused_setup_leaves_a_running_job_as_it_was(netsum_program, switches,  # noqa: F811
                                                        tmp_path: Path) -> None:
    info, js = netsum_program
    program = ("--p4info", str(info), str(js))
    good = topology("single.yaml", switches, tmp_path)
    rc, _, err = run_ctl(good, "setup", *program)
    assert rc == 0, err
    topo = parse_topology(good.read_text())
    dev = switches["s1"].dev
    # Job 2 (h1, h2) is running: h1 has contributed to slot 7, h2 has not yet.
    port, f = data_frame(topo, "h1", 2, 7, vec(1))
    assert dev.process(port, f) == []
    addr = topo.switches[0].grpc_addr
    before = state(addr, info)

    base = yaml.safe_load(good.read_text())
    for case, change, message in CASES:
        doc = copy.deepcopy(base)
        change(doc)
        bad = tmp_path / f"{case.replace(' ', '_')}.yaml"
        bad.write_text(yaml.safe_dump(doc))
        want = f"netsum-ctl: error: {bad}: {message}"
        for verb in (("setup", *program), ("topo", "show", *program[:2])):
            rc, out, err = run_ctl(bad, *verb)
            assert rc == 1 and out == "", (case, verb, out)
            assert err.startswith(want) and err.count("\n") == 1, (case, verb, err)
        assert state(addr, info) == before, f"{case}: the refused set-up changed the switch"
        if case == "job id 256":
            rc, out, err = run_verb_refuses(bad, *program)
            assert rc == 1 and err.startswith(want) and err.count("\n") == 1, err
            assert state(addr, info) == before, "the refused `run` changed the switch"

    # The half-done round completes: h1's contribution was kept, the sum is exact.
    port, f = data_frame(topo, "h2", 2, 7, vec(2))
    assert_results_to_h1_h2(dev.process(port, f), vec(1) + vec(2))


def assert_results_to_h1_h2(outs: list[tuple[int, bytes]], want: np.ndarray) -> None:
    """`outs` are RESULTs with `want`, one out of port 1 (h1) and one out of port 2 (h2)."""
    assert sorted(p for p, _ in outs) == [1, 2]
    for _, frame in outs:
        got = wire.parse_frame(frame, K).packet
        assert got.header.msg_type is MsgType.RESULT
        assert np.array_equal(got.values, want)


def test_topo_show_without_a_program_says_what_it_needs(tmp_path: Path) -> None:
    """The library's CLI without netsum's build: topo show needs the P4Info to check against,
    like set-up; with --p4info alone it checks and shows."""
    root = Path(__file__).resolve().parents[2]
    rc, _, err = run_ctl(root / "examples" / "single.yaml", "topo", "show")
    assert rc == 1 and "give --p4info P4INFO" in err and err.count("\n") == 1, err
