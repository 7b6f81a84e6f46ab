"""`netsum launch`: one command for training through the switch on one machine, the
equivalent of `torchrun --standalone` (torch-free: the ranks import torch).

    netsum launch --nproc-per-node 2 train.py --epochs 3

starts the switch (network namespaces as root, UDP-tunnel ports otherwise; `--mode`), builds
and pushes the pipeline and forwarding, lets go of P4Runtime, then starts N processes of the
script.  Each gets torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID) and
netsum's: NETSUM_TOPOLOGY, NETSUM_HOST, and its path to the switch (NETSUM_FRAMES and
NETSUM_FRAMES_BIND in UDP-tunnel mode; NETSUM_NETNS as root), and NETSUM_K, the values per
packet the switch was built for (`--k`, default 256; 512-2048 only emulate, beyond what a
Tofino-class switch holds per packet).  The job is installed on the
switch by the script's rank 0 at `init_process_group("netsum")` (or
`NetsumHookState.from_env()`), from that environment, exactly as under torchrun: the same
script runs under either launcher.

Output: every line a rank prints is shown as `[rankN]: line`, as torchrun's --tee does; each
rank's whole log stays in OUT/logs.  The exit status is the first failing rank's; a failing
rank stops the others (as torchrun does); Ctrl-C stops every rank and the switch.
"""
from __future__ import annotations

import secrets
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from netsum.procs import Child
from netsum.rig import Mode, Rig, RigConfig, RigError
from netsum.wire import K_DEFAULT

__all__ = ["LaunchOptions", "rank_env", "free_tcp_port", "start_rank", "launch"]


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_env(rig: Rig, rank: int, world: int, master_port: int,
             run_id: str = "none") -> dict[str, str]:
    """The environment of rank `rank`: torchrun's variables and netsum's (module docstring).
    The rank process stays in the root namespace (gloo, the store and P4Runtime on loopback);
    as root only its netsum socket is made in its host's namespace (NETSUM_NETNS)."""
    host = rig.layout.hosts[rank].name
    env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
           "LOCAL_WORLD_SIZE": str(world), "GROUP_RANK": "0", "ROLE_RANK": str(rank),
           "ROLE_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(master_port), "TORCHELASTIC_RUN_ID": run_id,
           "NETSUM_TOPOLOGY": str(rig.topology_path), "NETSUM_HOST": host,
           "NETSUM_K": str(rig.config.k),
           "PYTHONUNBUFFERED": "1"}
    if rig.lab is not None:
        env["NETSUM_NETNS"] = rig.lab.hosts[rank].name
    else:
        env["NETSUM_FRAMES"] = f"127.0.0.1:{rig.udp_ports[rank]}"
        addr, port = rig.peers[host]
        env["NETSUM_FRAMES_BIND"] = f"{addr}:{port}"     # the switch port's one fixed peer
    return env


def start_rank(rig: Rig, name: str, argv: Sequence[str], env: dict[str, str]) -> Child:
    return rig.procs.start(name, list(argv), env=env)


@dataclass(frozen=True, slots=True)
class LaunchOptions:
    script: Path
    args: tuple[str, ...] = ()
    nproc: int = 2
    mode: Mode = Mode.UDP
    out: Path = Path("results/launch")
    env: tuple[tuple[str, str], ...] = ()     # more variables for every rank
    k: int = K_DEFAULT                        # values per packet: the switch's build, NETSUM_K


class _Follower:
    """Prints new lines of the ranks' logs, each prefixed with its rank."""

    def __init__(self, children: Sequence[Child], write: Callable[[str], None]) -> None:
        self.children = children
        self.write = write
        self.at = [0] * len(children)
        self.partial = [""] * len(children)

    def poll(self, final: bool = False) -> None:
        for i, c in enumerate(self.children):
            if c.log_path is None or not c.log_path.exists():
                continue
            with c.log_path.open("rb") as fh:
                fh.seek(self.at[i])
                data = fh.read()
            self.at[i] += len(data)
            text = self.partial[i] + data.decode(errors="replace")
            lines = text.split("\n")
            self.partial[i] = "" if final else lines.pop()
            for line in lines:
                if line or not final:
                    self.write(f"[rank{i}]: {line}")


def launch(options: LaunchOptions, say: Callable[[str], None] = print) -> int:
    """Run the script's ranks through a switch of their own; the first failing rank's exit
    status (0 when every rank succeeded)."""
    if not options.script.exists():
        raise RigError(f"{options.script}: no such script")
    if not 1 <= options.nproc <= 8:
        raise RigError(f"--nproc-per-node must be 1..8, got {options.nproc}")
    cfg = RigConfig(options.out / "rig", workers=options.nproc, mode=options.mode, k=options.k)
    with Rig(cfg, say) as rig:
        rig.detach_controller()
        port = free_tcp_port()
        run_id = secrets.token_hex(4)
        say(f"netsum launch: switch up ({options.mode.value} mode, K={options.k}, topology "
            f"{rig.topology_path}); {options.nproc} ranks of {options.script}")
        children = []
        for rank in range(options.nproc):
            env = {**rank_env(rig, rank, options.nproc, port, run_id), **dict(options.env)}
            argv = [sys.executable, str(options.script), *options.args]
            children.append(start_rank(rig, f"rank{rank}-{run_id}", argv, env))
        return _wait(rig, children, say)


def _wait(rig: Rig, children: Sequence[Child], say: Callable[[str], None]) -> int:
    follow = _Follower(children, say)
    status = 0
    while any(c.alive() for c in children):
        follow.poll()
        failed = [c for c in children if not c.alive() and c.popen.returncode != 0]
        if failed and status == 0:
            status = _exit_status(failed[0].popen.returncode)
            say(f"netsum launch: {failed[0].name} exited with status "
                f"{failed[0].popen.returncode}; stopping the other ranks")
            rig.procs.stop()
        for name, sw in rig.switches.items():
            if not sw.alive() and status == 0:
                say(f"netsum launch: switch {name} exited: {sw.log_tail(3)}")
                status = 1
                rig.procs.stop()
        time.sleep(0.1)
    follow.poll(final=True)
    if status == 0:
        bad = [c for c in children if c.popen.returncode != 0]
        if bad:
            status = _exit_status(bad[0].popen.returncode)
            say(f"netsum launch: {bad[0].name} exited with status {bad[0].popen.returncode}")
    return status


def _exit_status(returncode: int) -> int:
    """A child's status as a shell reports it: 128 + N for death by signal N."""
    return returncode if returncode > 0 else 128 - returncode
