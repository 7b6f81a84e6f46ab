"""`netsum-ctl` against the embedded switch over real gRPC (in-process server on port 0):
every generic verb on real p4c output, the data plane effect of the writes, and bad input of
every kind answered by one line on stderr and a non-zero exit, with nothing half-installed."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether

from conftest import P4C_FIXTURES
from netsum.controller.cli import main
from netsum.p4rt.client import Endpoint, SwitchClient
from netsum.switch.device import Device
from netsum.switch.p4rt.server import P4RuntimeServer



class Switch:
    def __init__(self, device_id: int = 0) -> None:
        self.dev = Device(device_id=device_id)
        self.srv = P4RuntimeServer(self.dev, "127.0.0.1:0").start()
        self.addr = f"127.0.0.1:{self.srv.port}"

    def ctl(self, *argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        rc = main([*argv, "--grpc-addr", self.addr, "--timeout", "3"], out, err)
        return rc, out.getvalue(), err.getvalue()

    def ok(self, *argv: str) -> str:
        rc, out, err = self.ctl(*argv)
        assert rc == 0, err
        return out

    def fails(self, *argv: str) -> str:
        rc, out, err = self.ctl(*argv)
        assert rc != 0, out
        assert err.count("\n") == 1 and "Traceback" not in err, err
        return err


@pytest.fixture
def sw() -> Iterator[Switch]:
    s = Switch()
    try:
        yield s
    finally:
        s.srv.stop(None)


@pytest.fixture
def l2(sw: Switch, p4c_fixtures: Path) -> Switch:
    sw.ok("pipeline", "push", "--p4info", str(p4c_fixtures / "l2_mcast.p4info.txtpb"),
          str(p4c_fixtures / "l2_mcast.json"))
    return sw


@pytest.fixture
def calc(sw: Switch, p4c_fixtures: Path) -> Switch:
    sw.ok("pipeline", "push", "--p4info", str(p4c_fixtures / "calc_state.p4info.txtpb"),
          str(p4c_fixtures / "calc_state.json"))
    return sw


def frame(dst: str) -> bytes:
    return bytes(Ether(dst=dst, src="00:00:00:00:00:aa", type=0x1234) / (b"x" * 46))


def dump(sw: Switch, table: str) -> list[dict]:
    return json.loads(sw.ok("table_dump", table, "--json"))


def test_pipeline_push_and_show(l2: Switch) -> None:
    out = json.loads(l2.ok("pipeline", "show", "--json"))
    assert out["tables"] == ["L2Ingress.dmac", "L2Ingress.acl", "L2Egress.replica_rewrite"]
    assert out["primary"] is True and out["cookie"] != 0


def test_exact_entry_lifecycle_reaches_the_data_plane(l2: Switch) -> None:
    l2.ok("table_add", "dmac", "forward", "00:00:00:00:00:01", "=>", "3")
    assert [p for p, _ in l2.dev.process(1, frame("00:00:00:00:00:01"))] == [3]
    rows = dump(l2, "dmac")
    assert rows[0]["match"] == {"hdr.eth.dst": "00:00:00:00:00:01"}
    assert rows[0]["params"] == {"port": 3} and rows[0]["packets"] == 1
    assert rows[1]["is_default"] and rows[1]["action"] == "NoAction"
    l2.ok("table_modify", "dmac", "forward", "0:0:0:0:0:1", "=>", "0x5")
    assert [p for p, _ in l2.dev.process(1, frame("00:00:00:00:00:01"))] == [5]
    l2.ok("table_delete", "dmac", "00:00:00:00:00:01")
    # A miss floods to group 1, which does not exist here: nothing leaves.
    assert l2.dev.process(1, frame("00:00:00:00:00:01")) == []
    assert [r for r in dump(l2, "dmac") if not r["is_default"]] == []


def test_ternary_range_priority_and_text_dump(l2: Switch) -> None:
    l2.ok("table_add", "acl", "deny", "0&&&0", "5&&&0xfff", "1->4", "=>", "10")
    l2.ok("table_add", "acl", "to_cpu_copy", "00:00:00:00:00:aa&&&ff:ff:ff:ff:ff:ff", "0&&&0",
          "0->511", "=>", "7", "20")
    text = l2.ok("table_dump", "acl")
    assert "hdr.vlan.vid=5&&&0xfff sm.ingress_port=1->4" in text
    assert "session=7" in text and "priority" in text
    l2.ok("table_delete", "acl", "0&&&0", "5&&&0xfff", "1->4", "10")
    assert len([r for r in dump(l2, "acl") if not r["is_default"]]) == 1
    assert "1 entries deleted" in l2.ok("table_clear", "acl")


def test_multicast_groups_and_set_default(l2: Switch) -> None:
    # l2_mcast floods a dmac miss to group 1 (`sm.mcast_grp = 1` in apply).
    l2.ok("mc_mgrp_create", "1", "2", "3:1")
    l2.ok("mc_node_associate", "1", "9", "4")
    assert sorted(p for p, _ in l2.dev.process(1, frame("00:00:00:00:00:09"))) == [2, 3, 4]
    l2.ok("mc_node_dissociate", "1", "9")
    groups = json.loads(l2.ok("mc_dump", "--json"))
    assert groups == [{"mgid": 1, "replicas": [[2, 0], [3, 1]]}]
    assert sorted(p for p, _ in l2.dev.process(1, frame("00:00:00:00:00:09"))) == [2, 3]
    l2.ok("table_set_default", "dmac", "flood", "1")
    assert dump(l2, "dmac")[-1] == {"table": "L2Ingress.dmac", "match": {},
                                    "action": "L2Ingress.flood", "params": {"group": 1},
                                    "priority": 0, "is_default": True}
    l2.ok("mc_mgrp_destroy", "1")
    assert "(none)" in l2.ok("mc_dump")
    assert l2.dev.process(1, frame("00:00:00:00:00:09")) == []


def test_counter_read_and_reset(calc: Switch) -> None:
    # calc_state counts per op code in CalcIngress.per_op; write then read it back.
    rows = json.loads(calc.ok("counter_read", "per_op", "3", "--json"))
    assert rows == [{"index": 3, "packets": 0, "bytes": 0}]
    # Set a cell through the data-plane API, so the read has something to find.
    from netsum.switch.entries import CounterValue
    calc.dev.pipeline.counters["CalcIngress.per_op"].write(3, CounterValue(5, 0))
    assert json.loads(calc.ok("counter_read", "per_op", "3", "--json"))[0]["packets"] == 5
    assert json.loads(calc.ok("counter_read", "per_op", "--json")) == [
        {"index": 3, "packets": 5, "bytes": 0}]
    assert "index 16 is out of range 0..15" in calc.fails("counter_read", "per_op", "16")
    calc.ok("counter_reset", "per_op")
    assert json.loads(calc.ok("counter_read", "per_op", "--json")) == []


@pytest.mark.parametrize("argv, message", [
    (["table_add", "dmca", "forward", "1", "=>", "3"], "no table named 'dmca'. Did you mean 'dmac'?"),
    (["table_add", "dmac", "frward", "1", "=>", "3"], "has no action 'frward'. Did you mean 'forward'?"),
    (["table_add", "dmac", "deny", "1", "=>"], "action 'deny' is not an action of table 'dmac'"),
    (["table_add", "dmac", "forward", "1", "=>", "512"], "'512' does not fit in bit<9>"),
    (["table_add", "dmac", "forward", "1", "2", "=>", "3"], "needs 1 key value(s)"),
    (["table_add", "dmac", "forward", "1", "=>"], "takes 1 parameter(s) (port), got 0"),
    (["table_add", "dmac", "forward", "00:11:22", "=>", "1"], "not a number, MAC"),
    (["table_add", "dmac", "forward", "1/8", "=>", "1"], "not a lpm literal"),
    (["table_add", "acl", "deny", "1", "1", "5->1", "=>", "1"], "range '5->1' is empty"),
    (["table_add", "acl", "deny", "1", "1", "1->2", "=>"], "give a priority"),
    (["table_add", "acl", "deny", "1", "0x1fff&&&1", "1->2", "=>", "1"], "does not fit in bit<12>"),
    (["table_delete", "dmac", "00:00:00:00:00:01"], "NOT_FOUND"),
    (["table_set_default", "dmac", "forward"], "takes 1 parameter(s)"),
    (["counter_read", "dmac_hits"], "is a direct counter of table 'dmac'"),
    (["mc_mgrp_create", "0"], "multicast group id 0 is out of range 1..32767"),
    (["mc_mgrp_create", "5", "1:0", "1:0"], "INVALID_ARGUMENT"),
    (["mc_node_associate", "99", "1", "2"], "multicast group 99 does not exist"),
    (["mc_mgrp_destroy", "12"], "NOT_FOUND"),
    (["table_dump", "dmac", "--election-id", "x"], "is not an election id"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["table_dump", "calc_ops", "--p4info", str(P4C_FIXTURES / "calc_state.p4info.txtpb")],
     "does not describe the pipeline switch"),
    (["table_dump", "dmac", "--p4info", "/nonexistent"], "cannot read P4Info '/nonexistent'"),
    (["pipeline", "push", "--p4info", "/nonexistent"], "give both --p4info P4INFO and the BMv2"),
    # A P4Info that does not match the JSON loads (as in PI); a device config that is not
    # BMv2 JSON does not.
    (["pipeline", "push", "--p4info", str(P4C_FIXTURES / "calc_state.p4info.txtpb"),
      str(P4C_FIXTURES / "l2_mcast.p4")],
     "SetForwardingPipelineConfig failed: INVALID_ARGUMENT"),
    (["job", "list"], "`job` needs a topology file"),
])
def test_bad_input_is_one_line(l2: Switch, argv: list[str], message: str) -> None:
    assert message in l2.fails(*argv)


def test_a_failed_batch_leaves_nothing(l2: Switch) -> None:
    l2.ok("table_add", "dmac", "forward", "00:00:00:00:00:02", "=>", "2")
    before = dump(l2, "dmac")
    # Adding an existing key fails as a whole; the table is as it was.
    assert "ALREADY_EXISTS" in l2.fails("table_add", "dmac", "forward", "00:00:00:00:00:02",
                                        "=>", "4")
    assert dump(l2, "dmac") == before


def test_no_pipeline_unreachable_wrong_device(sw: Switch) -> None:
    assert "has no forwarding pipeline" in sw.fails("table_dump", "dmac")
    rc, _, err = sw.ctl("pipeline", "show")
    assert rc == 0
    out, err_ = io.StringIO(), io.StringIO()
    rc = main(["table_dump", "dmac", "--grpc-addr", "127.0.0.1:1", "--timeout", "0.5"], out, err_)
    assert rc == 1 and err_.getvalue() == ("netsum-ctl: error: no P4Runtime server answers at "
                                           "127.0.0.1:1 (waited 0.5 s)\n")
    msg = sw.fails("table_dump", "dmac", "--device-id", "1")
    assert "refused arbitration" in msg and "device" in msg


def test_non_primary_cannot_write(l2: Switch) -> None:
    primary = SwitchClient(Endpoint(l2.addr, 0, (0, 9)))
    primary.connect()
    try:
        assert primary.is_primary
        # Reads still work for a backup; writes are refused with a clear message.
        assert "dmac" in l2.ok("table_dump", "dmac", "--election-id", "0,2")
        msg = l2.fails("table_add", "dmac", "forward", "1", "=>", "1", "--election-id", "0,2")
        assert "not the primary" in msg
    finally:
        primary.close()
    assert [r for r in dump(l2, "dmac") if not r["is_default"]] == []


def test_console_script_in_a_subprocess(l2: Switch) -> None:
    """The installed entry point: same one-line error, exit status 1, no traceback."""
    exe = Path(sys.executable).with_name("netsum-ctl")
    if not exe.exists():
        pytest.skip(f"console script not installed beside {sys.executable}")
    p = subprocess.run([str(exe), "table_dump", "ipv4_lpm", "--grpc-addr", l2.addr],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert p.stderr == "netsum-ctl: error: no table named 'ipv4_lpm'\n"
    p = subprocess.run([str(exe), "table_dump", "dmac", "--grpc-addr", l2.addr, "--json"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and json.loads(p.stdout)[-1]["is_default"]


def test_shell_command_line(l2: Switch) -> None:
    out = l2.ok("shell", "--dry-run", "--device-id", "0", "--election-id", "0,3")
    assert f"--grpc-addr {l2.addr} --device-id 0 --election-id 0,3" in out


def test_shell_opens_p4runtime_shell_on_the_same_switch(l2: Switch) -> None:
    """`shell` hands over to p4runtime-shell with our ids; it sees the entry we added."""
    exe = Path(sys.executable).with_name("netsum-ctl")
    if not exe.exists():
        pytest.skip(f"console script not installed beside {sys.executable}")
    l2.ok("table_add", "dmac", "forward", "00:00:00:00:00:07", "=>", "7")
    script = ("print('ENTRIES', len(list(table_entry['L2Ingress.dmac'].read())))\nexit\n")
    p = subprocess.run([str(exe), "shell", "--grpc-addr", l2.addr], input=script,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "ENTRIES 1" in p.stdout


def test_a_forgotten_session_does_not_hang_exit(l2: Switch) -> None:
    """An unclosed session must still let the interpreter exit, cleanly (the stream's thread
    is a daemon, and the library closes the session before threads are joined)."""
    code = ("from netsum.p4rt.client import Endpoint, SwitchClient\n"
            f"c = SwitchClient(Endpoint('{l2.addr}', 0, (0, 1)))\n"
            "c.connect()\nprint('primary', c.is_primary)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout == "primary True\n", p.stderr
