"""A second, independent P4Runtime client: finsy (typed asyncio client, protobuf >= 4) in its
own virtualenv made by scripts/setup.sh, driven as a subprocess against the embedded server
over real gRPC.  It loads real p4c output (l2_mcast), writes an entry and a default action,
then runs its `delete_all`, which resets default entries with a MODIFY carrying no action
(P4Runtime's "reset to the program's default"); packets through the switch show each state."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers import embedded_server

ROOT = Path(__file__).resolve().parents[2]

FINSY_PY = ROOT / ".venv-finsy" / "bin" / "python"
DRIVER = ROOT / "tests" / "clients" / "finsy_driver.py"
DEVICE_ID = 3


def frame(dst: int) -> bytes:
    return dst.to_bytes(6, "big") + (0x0A0000000001).to_bytes(6, "big") + b"\x08\x00" + b"p" * 30


@pytest.mark.slow
def test_finsy_writes_reads_and_delete_all_resets_defaults(p4c_fixtures: Path) -> None:
    if not FINSY_PY.exists():
        pytest.skip(f"{FINSY_PY} is missing: run scripts/setup.sh (make setup) first")
    with embedded_server(DEVICE_ID) as (dev, srv):
        proc = subprocess.Popen(
            [str(FINSY_PY), str(DRIVER), f"127.0.0.1:{srv.port}", str(DEVICE_ID),
             str(p4c_fixtures / "l2_mcast.p4info.txtpb"), str(p4c_fixtures / "l2_mcast.json")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            line = proc.stdout.readline()
            assert line, proc.communicate(timeout=10)[1]
            one = json.loads(line)
            assert [(e["table"], e["action"]) for e in one["entries"]] == \
                [("dmac", "forward(port=0x2)")]
            assert one["default"] == "set_vlan(vid=0x7)"
            # forward(2), then the egress default pushes a VLAN tag with vid 7.
            (out,) = dev.process(1, frame(5))
            assert out[0] == 2 and out[1][12:16] == b"\x81\x00\x00\x07"
            proc.stdin.write("\n")
            proc.stdin.flush()
            two = json.loads(proc.stdout.readline())
            assert two["entries"] == [] and two["default"] == "NoAction()"
            # dmac misses now: mcast_grp 1 has no group, so nothing leaves; no VLAN rewrite.
            assert dev.process(1, frame(5)) == []
            proc.stdin.write("\n")
            proc.stdin.flush()
            assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
