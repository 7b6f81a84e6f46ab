"""Child processes of a run (switches, workers), each in its own process group, all stopped on
exit, on error and on SIGINT/SIGTERM: nothing a run starts is left running.  Children started
from the main thread also die when the starting process dies without cleaning up (SIGKILL, e.g.
of a test run): Linux's parent-death signal, set by setpriv before it execs the command (the
child's pid is the command's), and, for a parent that died before setpriv set it, a check of
the parent after it is set.  Not from other threads: the signal follows the thread that forked,
which may end long before the process."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = ["Child", "ProcessGroup"]

#: util-linux's setpriv (Debian: essential) sets the parent-death signal and execs the command:
#: the one safe place for it.  A preexec function in Python would run in the forked child of a
#: multi-threaded process, where it can deadlock or abort (seen: an RLock in _after_fork).
_SETPRIV = shutil.which("setpriv")

#: Run by /bin/sh between setpriv and the command, with the starting process's pid as $1.
#: Linux sends the parent-death signal when the parent dies, never later: a parent killed
#: between fork and setpriv's prctl leaves a child that nothing will signal, already adopted
#: by init (or a subreaper).  Reading the parent *after* the signal is set closes the window:
#: either the parent was still there then (its death will send the signal) or getppid(), read
#: by the shell at start-up into $PPID, is no longer it and the command is not started.
_PARENT_CHECK = '[ "$PPID" = "$1" ] || exit 1; shift; exec "$@"'


def _dies_with_parent(argv: list[str]) -> list[str]:
    """`argv` run so that it gets SIGKILL when this process dies; unchanged off Linux, without
    setpriv, or off the main thread (the signal follows the forking thread)."""
    if _SETPRIV is None or not sys.platform.startswith("linux") or \
            threading.current_thread() is not threading.main_thread():
        return argv
    return [_SETPRIV, "--pdeathsig", "KILL", "--", "/bin/sh", "-c", _PARENT_CHECK,
            "netsum-parent-check", str(os.getpid()), *argv]


@dataclass
class Child:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path | None

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


@dataclass
class ProcessGroup:
    log_dir: Path
    children: list[Child] = field(default_factory=list)
    _logs: list[IO[bytes]] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None,
              log: bool = True) -> Child:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log" if log else None
        out: IO[bytes] | int = subprocess.DEVNULL
        if log_path is not None:
            fh = open(log_path, "wb")
            self._logs.append(fh)
            out = fh
        popen = subprocess.Popen(_dies_with_parent(argv), stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                                 start_new_session=True)
        child = Child(name, popen, log_path)
        self.children.append(child)
        return child

    def stop(self, timeout: float = 3.0) -> None:
        """SIGTERM every group, wait, then SIGKILL what is left."""
        for child in self.children:
            if child.alive():
                try:
                    os.killpg(child.popen.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        for child in self.children:
            remaining = max(0.0, deadline - time.monotonic())
            try:
                child.popen.wait(remaining)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(child.popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                child.popen.wait()
        for fh in self._logs:
            fh.close()
        self._logs.clear()

    def __enter__(self) -> "ProcessGroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
