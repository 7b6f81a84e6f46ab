"""Crashed training runs do not stop the next one, on the real switch: five runs in a row are
killed (SIGKILL, every rank) mid-training, each leaving its 4 lane jobs on the switch -- with
runs of 1024 slots, three such leftovers and a 64-slot job fill the switch's 4096-slot pool, so
without reclaiming the fourth run fails ("needs 256 slots ... none are free"); each run
reclaims the previous run's jobs instead (their hosts are now held by its ranks) -- and a
sixth run registers and sums correctly.  A job without a lease (made with the controller, as netsum-ctl
does) on the same hosts is never touched.  Expected sums come from the inputs.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not installed (the `train` extra)")

from netsum.controller.fabric import Controller  # noqa: E402
from netsum.controller.topology import JobSpec, load_topology  # noqa: E402
from netsum.rig import Rig, RigConfig  # noqa: E402
from netsum.training.compare import TrainOptions, start_ranks, wait_ranks  # noqa: E402
from netsum.controller.leases import lease_of  # noqa: E402

pytestmark = pytest.mark.slow

SCRIPT = r'''
import datetime, os, sys, time
import torch, torch.distributed as dist
import netsum.training.backend
dist.init_process_group("netsum", timeout=datetime.timedelta(seconds=60))
r = dist.get_rank()
crash = sys.argv[-1] == "crash"
t = torch.full((3000,), float(r + 1)); dist.all_reduce(t)
print(f"READY {sorted(set(t.tolist()))} jobs {list(dist.group.WORLD.job.job_ids)}", flush=True)
while crash:            # training on until killed
    dist.all_reduce(torch.ones(3000))
dist.barrier()
dist.destroy_process_group()
'''


def _jobs(rig: Rig) -> dict[int, tuple[str, ...]]:
    with Controller(load_topology(rig.topology_path)) as ctl:
        ctl.connect()
        ctl.adopt()
        return {j: job.spec.workers for j, job in ctl.jobs.items()}


def test_five_crashed_runs_in_a_row_do_not_stop_a_sixth(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(SCRIPT)
    opts = TrainOptions(tmp_path, ranks=2, lanes=4, slots=1024)
    with Rig(RigConfig(tmp_path / "rig", workers=2)) as rig:
        # Someone's job on the same hosts, without a lease: it must survive every reclaim.
        rig.controller.create_job(JobSpec(200, ("h1", "h2"), 64))
        rig.detach_controller()
        for n in range(5):
            children = start_ranks(rig, f"crash{n}", tmp_path, opts, script=script,
                                   args=["crash"])
            deadline = time.monotonic() + 120
            while not all("READY [3.0]" in c.log_tail(50) for c in children):
                assert all(c.alive() for c in children), \
                    f"run {n}: " + "\n".join(c.log_tail(30) for c in children)
                assert time.monotonic() < deadline, f"run {n} did not start"
                time.sleep(0.2)
            time.sleep(0.5)
            for c in children:
                os.killpg(c.popen.pid, signal.SIGKILL)
            for c in children:
                c.popen.wait(30)
            left = _jobs(rig)
            assert 200 in left
            assert len(left) == 1 + 4, f"run {n} left its 4 lanes behind: {left}"
        children = start_ranks(rig, "sixth", tmp_path, opts, script=script, args=["finish"])
        ok, error = wait_ranks(children, 180)
        logs = [c.log_tail(60) for c in children]
        assert ok, f"{error}\n" + "\n".join(logs)
        assert "READY [3.0]" in logs[0]
        # Rank 0 said what it reclaimed: the fifth crashed run's 4 lanes.
        assert logs[0].count("reclaimed job") == 4, logs[0]
        assert "is now held by another run" in logs[0]
        left = _jobs(rig)
        assert left == {200: ("h1", "h2")}, left
        with Controller(load_topology(rig.topology_path)) as ctl:
            ctl.connect()
            ctl.adopt()
            assert lease_of(ctl.jobs[200]) is None
