"""Fuzzing the data plane while a job runs: seeded malformed and hostile frames
(tests/dpfuzz.py: random bytes, truncations at every header boundary, wrong lengths and
checksums, other msg_types, slots past the range, stale rounds, unknown jobs, oversize
frames, valid-looking DATA from non-members) injected into the same netsum-switch ports as a
running 4-worker job and into a rogue host's port, a share after every datagram a worker
sends.

Expectations, from the inputs and p4/README.md's packet walk: every RESULT the switch sends
is the integer sum of its round and every worker's result is those sums dequantized, bit for
bit; the job's refusal counters rose by exactly the frames aimed at them (drop_stale: at
least, as a worker's own late retransmission may be stale too); no RESULT reached the rogue
port; the switch stayed up and counted no internal error.

`NETSUM_FUZZ_SCALE=25` (scripts/fuzz-dataplane.sh) makes it the 10^5-frame run of
docs/reliability.md; `NETSUM_FUZZ_SEED` repeats a run.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from dpfuzz import fuzz_frames
from fuzzing import fuzz_count, fuzz_rng
from helpers import assert_switch_clean
from hostile import HostileSwitch
from netsum.procs import ProcessGroup
from rogue import is_netsum

FRAMES = 4000                 # x NETSUM_FUZZ_SCALE
FRAMES_PER_BLOCK = 1          # the job grows with the frame count: ~1 frame per DATA sent


@pytest.mark.slow
def test_hostile_frames_while_a_job_runs(tmp_path: Path) -> None:
    count = fuzz_count(FRAMES)
    rng, seed = fuzz_rng("dataplane fuzz", 1717)
    with ProcessGroup(tmp_path / "logs") as procs:
        sw = HostileSwitch(tmp_path, procs)
        sw.start()
        frames = fuzz_frames(sw.target(), rng, count)
        blocks = max(64, count // (FRAMES_PER_BLOCK * sw.n))
        run = sw.run_job(blocks, seed=seed, fuzz=frames)
        counters = sw.job_counters()
        stats = assert_switch_clean(sw.daemon.grpc_addr)
        assert sw.switch.alive()
    kinds = Counter(f.kind for f in frames)
    aimed = Counter(f.counter for f in frames if f.counter)
    print(f"\ndataplane fuzz: seed {seed}, {run.injected} frames in {run.seconds:.1f} s "
          f"({dict(kinds)}), job counters {counters}, RESULTs checked {run.check.checked}")
    assert run.injected == count
    assert run.returncodes == [0] * sw.n, run.logs
    assert not run.check.bad, run.check.bad[:5]
    assert run.check.checked["data"] >= sw.n * blocks
    assert run.outputs_exact
    for name, n in aimed.items():
        if name == "drop_stale":
            assert counters[name] >= n, (name, counters[name], n)
        else:
            assert counters[name] == n, (name, counters[name], n)
    assert not [f for f in sw.rogue_received if is_netsum(f, 2)], "a RESULT reached the rogue"
    assert stats["internal_errors"] == 0
