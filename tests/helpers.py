"""Helpers shared by the end-to-end and transport tests: free loopback ports, the built netsum
program, and a `netsum-switch` daemon started as a child process and read back from its ready
line.

Owns only test plumbing; the daemon's ready line is parsed by `netsum.rig.parse_ready_line`
(one definition for the rig and the tests), and child processes live in a
`netsum.procs.ProcessGroup`, so a test that fails half-way leaves nothing running.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from netsum.p4rt.client import Endpoint, SwitchClient, election
from netsum.procs import Child, ProcessGroup
from netsum.rig import Rig, RigConfig, RigError, SwitchReady, free_udp_ports, wait_switch_ready
from netsum.switch.device import Device
from netsum.switch.p4rt import P4RuntimeServer

__all__ = ["BIN", "ROOT", "free_port", "free_udp_ports", "built_netsum", "embedded_server",
           "SwitchDaemon", "p4rt_client", "switch_cmd", "checkout_env", "switch_module", "started_rigs",
           "switch_stats", "assert_switch_clean"]

#: Where the venv's console scripts (netsum-switch, netsum-ctl, netsum-worker) are.
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A loopback port free right now (TCP by default); the caller binds it soon after."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def built_netsum(k: int) -> tuple[Path, Path]:
    """(p4info, json) of p4/netsum.p4 for K=k, built by netsum.build if stale; a build failure
    fails the test with the compiler's message."""
    from netsum import build
    try:
        json_path, info_path = build.ensure_built(k=k)
    except build.BuildError as exc:
        pytest.fail(f"p4/netsum.p4 does not build: {exc}")
    return info_path, json_path


@contextlib.contextmanager
def embedded_server(device_id: int) -> Iterator[tuple[Device, P4RuntimeServer]]:
    """An in-process switch (no CPU port) with its P4Runtime server on a free loopback port,
    stopped on exit."""
    dev = Device(device_id=device_id, cpu_port=None)
    srv = P4RuntimeServer(dev, "127.0.0.1:0").start()
    try:
        yield dev, srv
    finally:
        srv.stop(None)


def p4rt_client(address: str, device_id: int = 0, election_id: int | None = 1,
                timeout: float | None = 60.0, options: Sequence[tuple[str, Any]] = ()
                ) -> SwitchClient:
    """The client library's SwitchClient for a server test: an int election id (None: requests
    without one), a generous deadline, gRPC channel options.  Not connected yet."""
    ep = Endpoint(address, device_id, None if election_id is None else election(election_id))
    return SwitchClient(ep, timeout, options)


def switch_cmd(*args: str) -> list[str]:
    """`python -m switch ARGS`: run with `checkout_env()`, the checkout's switch package."""
    return [sys.executable, "-m", "netsum.switch", *args]


def checkout_env() -> dict[str, str]:
    """This environment with the checkout first on PYTHONPATH (tests may run from any cwd)."""
    return dict(os.environ, PYTHONPATH=str(ROOT))


def switch_module(args: Sequence[str], cwd: Path | None = None
                  ) -> tuple[subprocess.Popen[str], str]:
    """`python -m switch ARGS` with stdout/stderr piped as text, and its ready line (its first
    line on stdout); a start that prints no ready line kills it and fails with what it said."""
    proc = subprocess.Popen(switch_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=cwd, env=checkout_env())
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "ready" not in line:
        proc.kill()
        raise AssertionError(f"no ready line: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc, line


@contextlib.contextmanager
def started_rigs(counts: Sequence[int], work_dir: Callable[[int], Path],
                 **config: Any) -> Iterator[dict[int, Rig]]:
    """One started Rig per worker count (work_dir(n) is rig n's directory; `config` the other
    RigConfig fields), all closed on exit, also when a later one fails to start."""
    made: dict[int, Rig] = {}
    try:
        for n in counts:
            rig = Rig(RigConfig(work_dir(n), workers=n, **config))
            made[n] = rig
            rig.start()
        yield made
    finally:
        for rig in made.values():
            rig.close()


def switch_stats(grpc_addr: str) -> dict[str, Any]:
    """{"stats": {...}, "first_error": ...} of a running netsum-switch (GetStats)."""
    from netsum.controller.queues import get_stats

    return get_stats(Endpoint(grpc_addr, 0), timeout=10.0)


def assert_switch_clean(grpc_addr: str, **expected: int) -> dict[str, int]:
    """No fault counted by the switch at `grpc_addr` (netsum.health.SHOULD_BE_ZERO), except
    the counts given in `expected` (e.g. udp_foreign=3), which must be exactly those."""
    from netsum.health import SHOULD_BE_ZERO

    reply = switch_stats(grpc_addr)
    stats = reply["stats"]
    want = {name: expected.get(name, 0) for name in (*SHOULD_BE_ZERO, *expected)}
    got = {name: stats.get(name, 0) for name in want}
    assert got == want, f"switch {grpc_addr}: {got} (first internal error: " \
        f"{reply.get('first_error')})"
    return dict(stats)


class SwitchDaemon:
    """`netsum-switch --no-p4` with the given `-i` specs, in `procs`.  `start()` waits for the
    ready line and returns what it reports (so `udp:127.0.0.1:0` and a gRPC port 0 need no
    free-port picking); `restart_argv` pins the reported ports so a restart comes back on the
    same addresses, as a crashed switch restarted by an operator would."""

    def __init__(self, procs: ProcessGroup, ifaces: Sequence[str],
                 grpc_addr: str = "127.0.0.1:0", name: str = "switch",
                 target_args: Sequence[str] = ()) -> None:
        self.procs = procs
        self.ifaces = list(ifaces)
        self.grpc_addr = grpc_addr
        self.name = name
        self.target_args = list(target_args)     # after `--`, e.g. --queue-depth 2:30
        self.child: Child | None = None
        self.ready: SwitchReady | None = None

    def argv(self) -> list[str]:
        argv = [str(BIN / "netsum-switch"), "--no-p4", "--device-id", "0"]
        for spec in self.ifaces:
            argv += ["-i", spec]
        return argv + ["--", "--grpc-server-addr", self.grpc_addr, *self.target_args]

    def start(self, timeout: float = 30.0) -> SwitchReady:
        self.child = self.procs.start(self.name, self.argv())
        try:
            ready = wait_switch_ready(self.child, timeout)
        except RigError as exc:
            raise AssertionError(str(exc)) from None
        if self.ready is None:
            self.ready = ready
            self._pin(ready)
        return ready

    def _pin(self, ready: SwitchReady) -> None:
        """Replace port 0 in the specs and the gRPC address by the ports the daemon bound."""
        pinned = []
        for spec in self.ifaces:
            num, _, rest = spec.partition("@")
            if rest.startswith("udp:") and int(num) in ready.udp_ports:
                local, sep, peer = rest[4:].partition("=" if "=" in rest else ",")
                host = local.rpartition(":")[0]
                spec = f"{num}@udp:{host}:{ready.udp_ports[int(num)]}{sep}{peer}"
            pinned.append(spec)
        self.ifaces = pinned
        if ready.grpc_addr is not None:
            self.grpc_addr = ready.grpc_addr

    @property
    def grpc_port(self) -> int:
        return int(self.grpc_addr.rpartition(":")[2])

    def kill(self) -> None:
        """SIGKILL, no goodbye, as in a crash."""
        if self.child is not None and self.child.alive():
            os.killpg(self.child.popen.pid, signal.SIGKILL)
            self.child.popen.wait(timeout=10)


# What netsum-worker prints once, before anything else, on a machine without a C compiler
# (workers/native.py): a notice, not part of an error.
PYTHON_CORE_NOTICE = "the worker core runs in Python: "


def error_text(stderr: str) -> str:
    """A worker's stderr without the Python-core notice: what the error tests count lines of."""
    return "".join(line for line in stderr.splitlines(keepends=True)
                   if not line.startswith(PYTHON_CORE_NOTICE))
