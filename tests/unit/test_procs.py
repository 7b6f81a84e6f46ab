"""netsum.procs: a child outlives no parent.  A parent process is SIGKILLed (no cleanup runs)
and the child it started through ProcessGroup must be gone soon after (parent-death signal),
also when the parent dies before the signal could be set."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PARENT = """
import os, sys, time
from pathlib import Path
from netsum.procs import ProcessGroup
os.environ["NETSUM_TEST_PARENT"] = str(os.getpid())
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


#: A stand-in for setpriv that holds the window between fork and the real setpriv's prctl open
#: until its parent has died: the worst moment for the parent to be SIGKILLed, made certain.
#: It writes `window-hit` once the parent is gone, then runs the real setpriv unchanged.
SLOW_SETPRIV = """#!/bin/sh
marker="$NETSUM_TEST_MARKER"
read -r _ _ _ ppid _ < /proc/$$/stat
while [ "$ppid" = "$NETSUM_TEST_PARENT" ]; do sleep 0.01; read -r _ _ _ ppid _ < /proc/$$/stat; done
echo parent-gone > "$marker"
exec {real} "$@"
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("setpriv") is None,
                    reason="parent-death signal is Linux, set by util-linux setpriv")
def test_a_parent_killed_before_the_signal_is_set_leaves_no_child(tmp_path: Path) -> None:
    """The race: the parent dies after fork but before setpriv set the parent-death signal;
    Linux sends that signal only at the parent's death, so it never comes.  The child must
    notice by itself that it has lost its parent."""
    fake = tmp_path / "bin"
    fake.mkdir()
    setpriv = fake / "setpriv"
    setpriv.write_text(SLOW_SETPRIV.format(real=shutil.which("setpriv")))
    setpriv.chmod(0o755)
    marker = tmp_path / "window-hit"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "NETSUM_TEST_MARKER": str(marker),
           "PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}"}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "logs")], text=True,
                              stdout=subprocess.PIPE, env=env)
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 60      # generous: the loop ends as soon as it can
        while (_alive(pid) or not marker.exists()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the stand-in setpriv never saw its parent die"
        assert not _alive(pid), "the child outlived a parent killed before setpriv ran"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
