"""netsum.procs: a child outlives no parent.  A parent process is SIGKILLed (no cleanup runs)
and the child it started through ProcessGroup must be gone soon after (parent-death signal)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PARENT = """
import sys, time
from pathlib import Path
from netsum.procs import ProcessGroup
group = ProcessGroup(Path(sys.argv[1]))
child = group.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
print(child.popen.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie not yet reaped by init counts as gone
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux")
def test_a_child_dies_with_its_sigkilled_parent(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], text=True,
                              stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(root)})
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    try:
        assert _alive(pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the child outlived its SIGKILLed parent"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
