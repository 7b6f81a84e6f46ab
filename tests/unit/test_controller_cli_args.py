"""netsum-ctl without a switch: argument parsing, usage errors as one line, `topo show`."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from netsum.controller.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out, err)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv, rc, message", [
    ([], 2, "netsum-ctl: give a verb"),
    (["job"], 2, "netsum-ctl job: give an action"),
    (["table_add"], 2, "the following arguments are required: table, action"),
    (["table_dump", "t", "--election-id", "1,2,3"], 2, "is not an election id"),
    (["table_dump", "t", "--device-id", "x"], 2, "'x' is not an integer"),
    # Configuration values float() or int() would take but no setting can mean (main 315630c:
    # --timeout nan waited forever, 1e999 failed in the clock, -1 was a deadline in the past,
    # an infinite --watch or --interval overflowed the sleep, --stuck-after nan turned the
    # watchdog off, a negative device id failed in protobuf's encoder).
    (["table_dump", "t", "--timeout", "1e999"], 2, "argument --timeout: '1e999' seconds: give "
     "more than 0 and at most 3600"),
    (["table_dump", "t", "--timeout", "-1"], 2, "'-1' seconds"),
    (["table_dump", "t", "--timeout", "0"], 2, "'0' seconds"),
    (["stats", "--watch", "nan"], 2, "argument --watch: 'nan' seconds"),
    (["stats", "--watch", "inf"], 2, "argument --watch: 'inf' seconds"),
    (["run", "--interval", "1e999"], 2, "argument --interval: '1e999' seconds"),
    (["run", "--stuck-after", "nan"], 2, "argument --stuck-after: 'nan' seconds: give 0 or "
     "more than 0"),
    (["table_dump", "t", "--device-id", "-1"], 2, "argument --device-id: -1 is out of range "
     "0..2^64-1"),
    (["table_dump", "t", "--election-id", "0,-1"], 2, "is not an election id"),
    (["table_dump", "t", "--election-id", str(1 << 64)], 2, "is not an election id"),
    (["dropsim", "set", "512", "0.1"], 2, "argument port: 512 is out of range 0..2^9-1"),
    (["dropsim", "set", "1", "nan", "--grpc-addr", "127.0.0.1:1"], 1,
     "drop probability nan is not within 0..1"),
    (["pipeline", "push", "--k", "48"], 2, "invalid choice: 48"),
    (["nonsense"], 2, "invalid choice: 'nonsense'"),
    (["topo", "show"], 1, "`topo show` needs a topology file"),
    (["stats"], 1, "`stats` needs a topology file"),
    (["table_dump", "t", "--grpc-addr", "127.0.0.1:1", "--timeout", "0.2"], 1,
     "no P4Runtime server answers at 127.0.0.1:1 (waited 0.2 s)"),
    (["table_dump", "t", "--topo", str(ROOT / "examples" / "tree.yaml"), "--timeout", "0.2"], 1,
     "has 3 switches: say which with --switch (root, leaf1, leaf2)"),
    (["table_dump", "t", "--topo", str(ROOT / "examples" / "tree.yaml"), "--switch", "leaf9"], 1,
     "no switch named 'leaf9'"),
])
def test_errors_are_one_line(argv: list[str], rc: int, message: str) -> None:
    got_rc, out, err = run(*argv)
    assert got_rc == rc and message in err and err.count("\n") == 1, err
    assert "Traceback" not in err and out == ""


def test_options_anywhere() -> None:
    # Common options may come before the verb, after it, or after table_add's `=>` words.
    a = run("--grpc-addr", "127.0.0.1:1", "--timeout", "0.2", "table_add", "t", "a", "1", "=>",
            "2")
    b = run("table_add", "t", "a", "1", "=>", "2", "--grpc-addr", "127.0.0.1:1", "--timeout",
            "0.2")
    assert a[0] == b[0] == 1 and a[2] == b[2] and "127.0.0.1:1" in a[2]


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--help")[0] == 0
    assert "table_add" in capsys.readouterr().out


#: Real p4c's P4Info of p4/netsum.p4: what `topo show` checks a file against (set-up's limits).
P4INFO = str(ROOT / "tests" / "fixtures" / "p4c" / "netsum" / "netsum_k256.p4info.txtpb")


def test_topo_show() -> None:
    rc, out, _ = run("topo", "show", "--topo", str(ROOT / "examples" / "tree.yaml"), "--json",
                     "--p4info", P4INFO)
    assert rc == 0
    data = json.loads(out)
    assert [s["switch"] for s in data["switches"]] == ["root", "leaf1", "leaf2"]
    assert {(j["job"], j["switch"]): j["contributors"] for j in data["jobs"]} == {
        (1, "leaf1"): "h1 h2", (1, "leaf2"): "h3 h4", (1, "root"): "leaf1 leaf2",
        (2, "leaf1"): "h1", (2, "leaf2"): "h3", (2, "root"): "leaf1 leaf2"}
    assert data["program"]["max_job_id"] == 255 and data["program"]["slot_pool"] == 4096
    rc, text, _ = run("topo", "show", "--topo", str(ROOT / "examples" / "single.yaml"),
                      "--p4info", P4INFO)
    assert rc == 0 and "1 switch(es), 4 host(s), 0 link(s), 2 job(s)" in text
