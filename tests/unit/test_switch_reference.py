"""The switch against tests/bmv2ref.py, a BMv2 JSON interpreter that shares no code with it
(no expression compiler, no generated code): netsum.p4 at K=32 and K=256 under random streams
and the randomised lane programs of test_switch_lanes, frame by frame and register by
register.  The switch runs its default, fully optimised pipeline (register lanes, guard
fusion, inlined tables and parser states)."""
from __future__ import annotations

import json
import random

import pytest

from bmv2ref import Reference
from netsum.switch.device import Device
from netsum.switch.pipeline import Pipeline
from test_switch_lanes import Gen, _frame


def _regs(dev: Device) -> dict[str, list[int]]:
    assert dev.pipeline is not None
    return {n: [int(x) for x in r.values] for n, r in dev.pipeline.registers.items()}


@pytest.mark.parametrize("k", [32, 256])
def test_netsum_p4_agrees_with_the_independent_interpreter(k: int) -> None:
    import p4helpers as helpers
    cfg = helpers.netsum_config(k)
    sw = helpers.NetsumSwitch(cfg)
    hosts = [helpers.worker_host(i) for i in range(4)]
    sw.add_job(3, hosts, num_slots=8)
    assert sw.pipeline.lanes.lanes_fused() >= 5 * k and sw.pipeline.lanes.lanes_fused() % k == 0
    ref = Reference.from_device(json.loads(cfg), sw.device)
    rng = random.Random(100 + k)
    senders = hosts + [helpers.worker_host(4)]          # the fifth is no member
    results = 0
    cur = [0] * 9                                        # each slot's current round
    for _ in range(250):
        h = rng.choice(senders)
        slot = rng.randrange(9)
        roll = rng.random()
        if roll < 0.12:
            cur[slot] += 1                               # the slot's next use
        rnd = cur[slot] - 1 if roll > 0.95 else cur[slot]  # now and then a stale round
        vals = [rng.choice([-(1 << 31), (1 << 31) - 1, -1, 0, 1]) if rng.random() < 0.3 else
                rng.randrange(-(1 << 31), 1 << 31) for _ in range(k)]
        frame = helpers.netsum_frame(h, job_id=rng.choice([3, 3, 3, 7]), slot=slot,
                                     round=rnd & 0xFFFFFFFF, values=vals, exp=rng.randrange(256),
                                     flags=rng.choice([0, 1]))
        if rng.random() < 0.08:
            frame = frame[:rng.randrange(len(frame))]
        want = ref.process(h.port, frame)
        got = sw.device.process(h.port, frame)
        assert got == want
        results += sum(1 for _p, f in got if len(f) > 60)
    assert results > 20                       # aggregates really went out
    assert _regs(sw.device) == ref.registers
    assert sw.device.stats.internal_errors == 0


def test_lane_programs_agree_with_the_independent_interpreter() -> None:
    vectorised = 0
    for seed in range(40):
        g = Gen(seed)
        j = g.program()
        dev = Device(seed=5)
        dev.install(Pipeline(json.loads(json.dumps(j))))
        assert dev.pipeline is not None
        vectorised += dev.pipeline.lanes.lanes_fused() > 0
        ref = Reference.from_device(j, dev, seed=5)
        rng = random.Random(seed)
        for _ in range(20):
            frame = _frame(rng, g.lanes, g.width)
            assert dev.process(2, frame) == ref.process(2, frame), seed
        assert _regs(dev) == ref.registers, seed
        assert dev.stats.register_oob == ref.register_oob, seed
    assert vectorised >= 20
