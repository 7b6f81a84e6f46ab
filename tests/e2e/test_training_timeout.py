"""The process group's timeout is the switch path's deadline (NETSUM_TIMEOUT overrides it), on
the real switch: a rank paused 30 s under a 60 s timeout finishes -- three times the old fixed
10 s deadline --, and the same pause under NETSUM_TIMEOUT=2 fails every rank within seconds,
naming the deadline.  The expected sums come from the inputs.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not installed (the `train` extra)")

from netsum.rig import Rig, RigConfig  # noqa: E402
from netsum.training.compare import TrainOptions, start_ranks, wait_ranks  # noqa: E402

pytestmark = pytest.mark.slow

SCRIPT = r'''
import datetime, json, sys, time
import torch, torch.distributed as dist
import netsum.training.backend
timeout, pause = (float(a) for a in sys.argv[-2:])
dist.init_process_group("netsum", timeout=datetime.timedelta(seconds=timeout))
r = dist.get_rank()
t = torch.ones(1000); dist.all_reduce(t)
if r == 1:
    time.sleep(pause)       # a checkpoint write, a slow data loader
started = time.monotonic()
t = torch.full((1000,), float(r + 1)); dist.all_reduce(t)
print("RESULT " + json.dumps({"sum": sorted(set(t.tolist())), "waited": time.monotonic() - started,
                              "deadline": dist.group.WORLD.deadline}), flush=True)
dist.barrier()
dist.destroy_process_group()
'''


def _run(tmp_path: Path, timeout: float, pause: float, netsum_timeout: float | None,
         limit: float) -> tuple[bool, list[str]]:
    script = tmp_path / "pause.py"
    script.write_text(SCRIPT)
    with Rig(RigConfig(tmp_path / "rig", workers=2)) as rig:
        rig.detach_controller()
        opts = TrainOptions(tmp_path, ranks=2, netsum_timeout=netsum_timeout)
        children = start_ranks(rig, "pause", tmp_path, opts, script=script,
                               args=[str(timeout), str(pause)])
        # start_ranks puts the example's options first; the script reads its last two.
        ok, _ = wait_ranks(children, limit)
        return ok, [c.log_tail(40) for c in children]


def _result(log: str) -> dict[str, object]:
    line = next(ln for ln in log.splitlines() if ln.startswith("RESULT "))
    doc: dict[str, object] = json.loads(line[len("RESULT "):])
    return doc


def test_a_rank_paused_30s_under_a_60s_timeout_finishes(tmp_path: Path) -> None:
    ok, logs = _run(tmp_path, timeout=60.0, pause=30.0, netsum_timeout=None, limit=240)
    assert ok, "\n".join(logs)
    got = _result(logs[0])
    assert got["sum"] == [3.0] and got["deadline"] == 60.0
    assert float(str(got["waited"])) >= 25.0, "rank 0 did wait for its paused peer"


def test_netsum_timeout_overrides_the_group_timeout(tmp_path: Path) -> None:
    started = time.monotonic()
    ok, logs = _run(tmp_path, timeout=60.0, pause=8.0, netsum_timeout=2.0, limit=120)
    assert not ok
    assert "WorkerTimeoutError" in logs[0] and "deadline 2s" in logs[0], logs[0]
    assert "RESULT" not in logs[0]
    assert time.monotonic() - started < 120
