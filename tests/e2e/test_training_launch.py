"""`netsum launch --nproc-per-node N script.py ARGS` (netsum.training.launch): one command
starts the switch and N ranks with torchrun's and netsum's environment; the script's own
init_process_group("netsum") installs the job and sums through the switch.  Expected values
come from the inputs and from torchrun's documented environment."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not installed (the `train` extra)")

pytestmark = pytest.mark.slow

NETSUM = str(Path(sys.executable).parent / "netsum")

SCRIPT = r'''
import datetime, os, sys
import torch, torch.distributed as dist
import netsum.training.backend
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "NETSUM_HOST")
print("ENV " + " ".join(f"{k}={os.environ[k]}" for k in keys), "ARGS", sys.argv[1:], flush=True)
if sys.argv[1:] == ["--fail"] and os.environ["RANK"] == "1":
    sys.exit(3)
dist.init_process_group("netsum", timeout=datetime.timedelta(seconds=60))
t = torch.full((1000,), float(dist.get_rank() + 1), dtype=torch.bfloat16)
dist.all_reduce(t)
# one write per line: both ranks share torchrun's stdout (a pipe: writes this small are atomic)
sys.stdout.write(f"SUM {sorted(set(t.tolist()))} SWITCHED {dist.group.WORLD.switched}\n")
sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()
'''


def _launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    return subprocess.run([NETSUM, "launch", "--mode", "udp", "--out", str(tmp_path / "out"),
                           "--nproc-per-node", "2", str(script), *args],
                          capture_output=True, text=True, timeout=300)


def test_launch_runs_the_ranks_through_a_switch_of_their_own(tmp_path: Path) -> None:
    proc = _launch(tmp_path, "--lr", "0.1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for r in range(2):
        assert (f"[rank{r}]: ENV RANK={r} LOCAL_RANK={r} WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 "
                f"MASTER_ADDR=127.0.0.1 NETSUM_HOST=h{r + 1} ARGS ['--lr', '0.1']") in out
        assert f"[rank{r}]: SUM [3.0] SWITCHED 1" in out, out


def test_a_failing_rank_stops_the_others_and_gives_its_status(tmp_path: Path) -> None:
    proc = _launch(tmp_path, "--fail")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "rank1" in proc.stdout and "exited with status 3" in proc.stdout
    assert "SUM [" not in proc.stdout


def test_one_torchrun_command_for_every_rank_with_per_rank_lists(tmp_path: Path) -> None:
    """docs/training.md's by-hand example: the switch set up by anything (here the rig), then
    one `torchrun --standalone --nproc-per-node 2`, each rank taking its host and switch port
    from comma-separated lists by LOCAL_RANK."""
    from netsum.rig import Rig, RigConfig
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    with Rig(RigConfig(tmp_path / "rig", workers=2)) as rig:
        rig.detach_controller()
        hosts = [h.name for h in rig.layout.hosts]
        env = {"NETSUM_TOPOLOGY": str(rig.topology_path), "NETSUM_HOST": ",".join(hosts),
               "NETSUM_FRAMES": ",".join(f"127.0.0.1:{rig.udp_ports[r]}" for r in range(2)),
               "NETSUM_FRAMES_BIND": ",".join(f"{rig.peers[h][0]}:{rig.peers[h][1]}"
                                              for h in hosts),
               "OMP_NUM_THREADS": "1"}
        proc = subprocess.run([str(Path(sys.executable).parent / "torchrun"), "--standalone",
                               "--nproc-per-node", "2", str(script)],
                              env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("SUM [3.0] SWITCHED 1") == 2, proc.stdout
