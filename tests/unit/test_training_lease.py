"""The lease rules of netsum.training.lease that need no switch: a process named by pid and
start time (a reused pid does not pass for a dead owner), and when an owner counts as gone.
The whole reclaim, on the real switch: tests/e2e/test_training_leases.py."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from netsum.training.lease import LEASE_PREFIX, lease_record, owner_gone, process_start


def _lease(pid: int, start: str | None, host: str | None = None) -> dict[str, object]:
    return {"run": "r", "owner": {"host": host or socket.gethostname(), "pid": pid,
                                  "start": start}}


def test_a_live_owner_is_not_gone_and_a_dead_or_reused_pid_is() -> None:
    me = os.getpid()
    assert process_start(me) is not None
    assert not owner_gone(_lease(me, process_start(me)))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = process_start(child.pid)
    child.wait()
    assert process_start(child.pid) is None
    assert owner_gone(_lease(child.pid, start))
    # A live process with another start time is not the owner: the pid was reused.
    assert owner_gone(_lease(me, "1"))


def test_an_owner_on_another_machine_is_never_judged_from_here() -> None:
    assert not owner_gone(_lease(2 ** 22 + 12345, "1", host="another-machine"))
    assert not owner_gone({"run": "r"})


def test_the_record_names_this_process() -> None:
    rec = lease_record("abc", ["h1", "h2"])
    assert rec.startswith(LEASE_PREFIX)
    doc = json.loads(rec[len(LEASE_PREFIX):])
    assert doc["run"] == "abc" and doc["hosts"] == ["h1", "h2"]
    assert doc["owner"] == {"host": socket.gethostname(), "pid": os.getpid(),
                            "start": process_start(os.getpid())}
