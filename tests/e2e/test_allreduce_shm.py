"""All-reduce end to end over shared-memory switch ports (`Mode.SHM`: `-i N@shm:PATH`,
netsum-worker --shm), against the same jobs over UDP-tunnel ports: real netsum-switch daemons
configured by the controller, real netsum-worker processes.  Every result is checked against
the float64 sum within the documented bound, and the two port kinds must give bit-identical
sums (the switch adds the same integers whatever carried the frames)."""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from helpers import error_text, started_rigs
from netsum.rig import Mode, Rig, RigConfig, RigError
from netsum.tensors import synthetic_inputs
from netsum.wire import K_DEFAULT
from test_allreduce_udp import assert_exact

K = K_DEFAULT


@pytest.fixture(scope="module")
def rigs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Mode, Rig]]:
    out: dict[Mode, Rig] = {}
    with started_rigs((4,), lambda n: tmp_path_factory.mktemp("shm"), slots=64, timeout=20,
                      mode=Mode.SHM) as shm, \
            started_rigs((4,), lambda n: tmp_path_factory.mktemp("udp"), slots=64,
                         timeout=20) as udp:
        out[Mode.SHM], out[Mode.UDP] = shm[4], udp[4]
        yield out


@pytest.mark.parametrize("shape", [(1,), (K,), (K + 1,), (20_000,)],
                         ids=["one-element", "one-packet", "one-packet-plus-1", "windows"])
def test_shm_ports_give_the_udp_ports_sums_bit_for_bit(rigs: dict[Mode, Rig],
                                                       shape: tuple[int, ...]) -> None:
    inputs = synthetic_inputs(4, shape, seed=len(shape) + shape[0])
    outs = {m: rigs[m].run_job(inputs, keep_results=True) for m in (Mode.SHM, Mode.UDP)}
    for out in outs.values():
        assert_exact(out)
        assert out.problems == ()
    for a, b in zip(outs[Mode.SHM].results, outs[Mode.UDP].results):
        assert a.tobytes() == b.tobytes()
    assert len(outs[Mode.SHM].results) == 4
    assert all(np.array_equal(r, outs[Mode.SHM].results[0]) for r in outs[Mode.SHM].results)


def test_rig_refuses_shm_with_a_tree_or_real_bmv2(tmp_path: Path) -> None:
    with pytest.raises(RigError, match="mode udp"):
        RigConfig(tmp_path, workers=4, leaves=2, mode=Mode.SHM)


@pytest.mark.parametrize("args, code, says", [
    (["--shm", "/nonexistent/p.sock", "--mac", "02:00:00:00:00:01", "--ip", "10.0.0.1",
      "--service-mac", "02:00:00:00:00:fe", "--service-ip", "10.0.0.254"], 1,
     "shared-memory port /nonexistent/p.sock: No such file or directory"),
    (["--shm", "/x.sock"], 2, "--shm needs --mac, --ip, --service-mac, --service-ip"),
    (["--shm", "/x.sock", "--frames", "127.0.0.1:9"], 2,
     "give exactly one of --udp, --frames and --shm"),
])
def test_worker_shm_errors_are_one_line(args: list[str], code: int, says: str) -> None:
    r = subprocess.run([str(Path(sys.executable).parent / "netsum-worker"), "--job", "1",
                        "--workers", "2", "--slots", "8", "--size", "10", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == code, r.stderr
    err = error_text(r.stderr)
    assert err.count("\n") == 1 and says in err, r.stderr
