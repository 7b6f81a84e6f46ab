"""The modes `netsum demo`, `train` and `launch` accept: netns and udp.  Their workers and
training ranks have no shared-memory transport, so `--mode shm` (a rig mode of vs_gloo and the
end-to-end tests) must be refused, not silently run as netns (it was, before this test)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from netsum.demo import choose_mode
from netsum.rig import Mode


@pytest.mark.parametrize("command", ["demo", "train", "launch"])
def test_mode_shm_is_refused_by_the_cli(command: str) -> None:
    args = [sys.executable, "-m", "netsum.cli", command, "--mode", "shm"]
    if command == "launch":
        args.append("script.py")
    run = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "--mode: invalid choice: 'shm' (choose from 'netns', 'udp')" in run.stderr


def test_choose_mode_refuses_shm_and_keeps_the_others() -> None:
    with pytest.raises(ValueError, match="'shm'"):
        choose_mode(Mode.SHM)
    assert choose_mode(Mode.UDP) == (Mode.UDP, "as asked")
    assert choose_mode(None, leaves=2)[0] is Mode.UDP
