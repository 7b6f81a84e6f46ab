"""Clean-up that still happens when a Mininet script is killed outright (SIGKILL, a closed
terminal, an out-of-memory kill), where no `finally` runs.

What a killed script leaves: Mininet's switch-to-switch veth pairs (both ends sit in the root
namespace, so nothing removes them: the next run's build fails with "RTNETLINK answers: File
exists"), the switch processes (their own sessions), and any host namespace a worker process
still holds open (with it the host's veth pair and its switch-side end).

`Guard` starts a watcher process in a session of its own, so a signal to the script's process
group does not reach it, and tells it over a pipe what the network is made of: the root-namespace
interface names, the switch processes' groups, the host namespaces.  When the pipe closes
without `close()` having said so -- the script died -- the watcher kills every process in those
namespaces and those groups and deletes those interfaces that still exist.  A network stopped
the ordinary way is `forget()`-ten first, so the watcher never touches a later network that
reuses the names.

Invariant: the watcher acts only on what it was told; it never matches names or processes by
pattern.  Used by netsum/experiments/testbed.py, mininet/allreduce_experiment.py and (through `note_pgid`)
mnswitch.NetsumSwitch.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

__all__ = ["Guard", "active", "note_pgid"]

_active: "Guard | None" = None


def active() -> "Guard | None":
    """The guard of the network being built or run, if any."""
    return _active


def note_pgid(pgid: int) -> None:
    """Tell the active guard (if any) about a process group to kill if the script dies."""
    if _active is not None:
        _active.note("pgid", str(pgid))


class Guard:
    """The watcher of one network; `with Guard() as g:` or start/close by hand."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._pipe: IO[bytes] | None = None

    def __enter__(self) -> "Guard":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        global _active
        # Its own session: Ctrl-C at a terminal and `kill -- -PGID` reach the script only.
        self._proc = subprocess.Popen([sys.executable, "-m", __name__, "--watch"],
                                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True,
                                      close_fds=True)
        self._pipe = self._proc.stdin
        _active = self

    def note(self, kind: str, value: str) -> None:
        """kind: `intf` (a root-namespace interface name), `pgid` (a process group), `netns`
        (a pid whose network namespace is the host's)."""
        if self._pipe is None:
            return
        try:
            self._pipe.write(f"{kind} {value}\n".encode())
            self._pipe.flush()
        except OSError:
            pass

    def forget(self) -> None:
        """The network was stopped the ordinary way: nothing is left to clean."""
        self.note("clear", "-")

    def close(self) -> None:
        """Stop the watcher without it cleaning anything still noted (call `forget` or clean
        up first); the script's own clean-up has run."""
        global _active
        if _active is self:
            _active = None
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            try:
                pipe.write(b"done -\n")
                pipe.close()
            except OSError:
                pass
        if self._proc is not None:
            try:
                self._proc.wait(10.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None


# -- the watcher process ----------------------------------------------------------------------

def _netns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _pids_in(namespaces: set[str]) -> list[int]:
    """Live processes in these namespaces (a zombie has left its namespace already)."""
    me = os.getpid()
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == me or _netns(int(p.name)) not in namespaces:
            continue
        try:
            if (p / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        except (OSError, IndexError):
            continue
        out.append(int(p.name))
    return out


def _clean(intfs: list[str], pgids: set[int], namespaces: set[str]) -> None:
    for pgid in pgids:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    for _ in range(3):          # a dying shell may still fork once
        pids = _pids_in(namespaces)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.2)
    # A namespace goes (and with it its veth ends) once its last process is reaped; the pair's
    # root-namespace end then disappears too.  Wait briefly, then delete what remains.
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and _pids_in(namespaces):
        time.sleep(0.1)
    for name in intfs:
        if Path(f"/sys/class/net/{name}").exists():
            subprocess.run(["ip", "link", "del", name], capture_output=True)


def _watch() -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    intfs: list[str] = []
    pgids: set[int] = set()
    namespaces: set[str] = set()
    for raw in sys.stdin.buffer:
        kind, _, value = raw.decode(errors="replace").strip().partition(" ")
        if kind == "done":
            return 0
        if kind == "clear":
            intfs, pgids, namespaces = [], set(), set()
        elif kind == "intf" and value not in intfs:
            intfs.append(value)
        elif kind == "pgid" and value.isdigit():
            pgids.add(int(value))
        elif kind == "netns" and value.isdigit():
            ns = _netns(int(value))
            # Never the watcher's own (root) namespace: that would kill everything.
            if ns is not None and ns != _netns(os.getpid()):
                namespaces.add(ns)
    _clean(intfs, pgids, namespaces)       # EOF without "done": the script died
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--watch"]:
        sys.exit(_watch())
    print("usage: python -m netsum.experiments.mnguard --watch (started by mininet scripts)", file=sys.stderr)
    sys.exit(2)
