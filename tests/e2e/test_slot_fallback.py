"""Slot exhaustion: a job the controller cannot give switch slots (another job holds them)
still completes, as a host ring all-reduce among its workers (netsum.workers.ring, the experiments'
baseline: one implementation, two uses), with the same quantization and the same check, and
its outcome says it ran on the fallback and why.  Once the other job is gone, jobs run on the
switch again."""
from __future__ import annotations

from pathlib import Path

from netsum.controller.topology import JobSpec
from netsum.rig import POOL_SLOTS, Rig, RigConfig
from netsum.tensors import synthetic_inputs


def test_no_free_slots_falls_back_to_the_host_ring(tmp_path: Path) -> None:
    said: list[str] = []
    with Rig(RigConfig(tmp_path, workers=4, slots=64, timeout=20), say=said.append) as rig:
        hosts = tuple(h.name for h in rig.layout.hosts)
        # another job (not the rig's) holds all but 32 of the pool's slots
        rig.controller.create_job(JobSpec(200, hosts, POOL_SLOTS - 32))
        xs = synthetic_inputs(4, (40_000,), seed=61)
        out = rig.run_job(xs)
        assert out.ok, [w.error for w in out.workers]
        assert "no switch slots" in out.fallback and "needs 64 contiguous slots" in \
            out.fallback and "32 of 4096 are free" in out.fallback, out.fallback
        assert any("host ring all-reduce" in line for line in said), said
        assert out.switch_counters == {}          # nothing went through the switch
        # the slots come back: the next job runs on the switch
        rig.controller.delete_job(200)
        again = rig.run_job(xs)
        assert again.ok and again.fallback == ""
        assert again.switch_counters["data_in"] > 0
