"""The C preprocessor stage: runs the system ``cpp`` like p4c does.

Keeps line markers (``# N "file"``) in the output so the lexer can map every token back to
its original file and line.  Our own ``core.p4``/``v1model.p4`` live in ``p4include/`` and are
found through ``-I`` like p4c's installed include directory.
"""
from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

from .diagnostics import NOPOS, Diagnostics, Pos

__all__ = ["INCLUDE_DIR", "preprocess"]

INCLUDE_DIR = Path(__file__).resolve().parent / "p4include"
#: Bounds on the preprocessor (every real program is far below them: p4c's largest samples
#: preprocess to well under 1 MiB).
MAX_PREPROCESSED = 16 << 20
CPP_MEMORY = 512 << 20
CPP_SECONDS = 30
_PRLIMIT = shutil.which("prlimit")


def _cpp_argv(filename: str, include_dirs: Sequence[str | Path],
              defines: Mapping[str, str | None] | None) -> list[str]:
    cpp = shutil.which("cpp") or "/usr/bin/cpp"
    # -undef: no host macros (linux, unix) leak into P4; -nostdinc: no C headers.
    argv = [cpp, "-E", "-undef", "-nostdinc", "-x", "c", "-w"]
    for d in include_dirs:
        argv += ["-I", str(d)]
    argv += ["-I", str(INCLUDE_DIR)]
    argv.append("-D__TARGET_BMV2__")
    argv.append("-D__p4c__")
    for name, value in (defines or {}).items():
        argv.append(f"-D{name}" if value is None else f"-D{name}={value}")
    argv.append(filename)
    return argv


def preprocess(text: str, filename: str, include_dirs: Sequence[str | Path],
               defines: Mapping[str, str | None] | None, diags: Diagnostics) -> str | None:
    """Return the preprocessed text (with line markers) or None after reporting an error.

    Bounded: cpp runs under an address-space limit (util-linux prlimit, where present) and a
    time limit, and its output is read with a cap, so `#include "/dev/zero"` or macros that
    expand exponentially end in one error within seconds instead of gigabytes."""
    argv = _cpp_argv("-", include_dirs, defines)
    # cpp names stdin "<stdin>"; tell it the real name through a leading line marker so
    # positions and relative #include "x.p4" keep working.
    parent = str(Path(filename).resolve().parent) if filename != "<string>" else None
    if parent:
        argv[-1:-1] = ["-I", parent]
    if _PRLIMIT:
        argv = [_PRLIMIT, f"--as={CPP_MEMORY}", "--", *argv]
    source = (f'# 1 "{filename}"\n' + text).encode()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as exc:
        diags.error(NOPOS, f"cannot run the C preprocessor ({argv[0]}): {exc}")
        return None
    out, err, why = _bounded_run(proc, source)
    if why:
        diags.error(NOPOS, why)
        return None
    if proc.returncode != 0:
        for line in err.decode(errors="replace").splitlines():
            pos, msg = _parse_cpp_error(line, filename)
            if msg is not None:
                diags.error(pos, msg)
        if not diags.errors:
            message = err.decode(errors="replace").strip()
            if proc.returncode < 0 or "memory" in message:
                message = (f"the C preprocessor ran out of its {CPP_MEMORY >> 20} MiB "
                           f"(an #include of a device or an endless file?) {message}").strip()
            diags.error(NOPOS, f"preprocessor failed: {message}")
        return None
    try:
        return out.decode()
    except UnicodeDecodeError as exc:
        diags.error(NOPOS, f"preprocessor output is not UTF-8 (byte {exc.start})")
        return None


def _bounded_run(proc: subprocess.Popen[bytes], source: bytes) -> tuple[bytes, bytes, str]:
    """Feed `source`, collect stdout up to MAX_PREPROCESSED bytes and stderr up to 64 kB
    within CPP_SECONDS; kill cpp past any bound.  Returns (stdout, stderr, why-killed)."""
    assert proc.stdin and proc.stdout and proc.stderr
    out: list[bytes] = []
    err: list[bytes] = []
    size = [0]
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr

    def feed() -> None:
        try:
            stdin.write(source)
            stdin.close()
        except OSError:
            pass        # cpp stopped reading (killed, or failed early)

    def drain(stream: Any, into: list[bytes], cap: int) -> None:
        while True:
            chunk = stream.read1(1 << 16)
            if not chunk:
                return
            size_now = sum(len(c) for c in into) if into is err else size[0]
            if size_now + len(chunk) > cap:
                if into is out:
                    size[0] = cap + 1
                proc.kill()
                return
            into.append(chunk)
            if into is out:
                size[0] += len(chunk)

    threads = [threading.Thread(target=feed, daemon=True),
               threading.Thread(target=drain, args=(stdout, out, MAX_PREPROCESSED), daemon=True),
               threading.Thread(target=drain, args=(stderr, err, 1 << 16), daemon=True)]
    for t in threads:
        t.start()
    try:
        proc.wait(timeout=CPP_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return b"", b"", f"the C preprocessor took more than {CPP_SECONDS} s"
    for t in threads:
        t.join(timeout=5)
    if size[0] > MAX_PREPROCESSED:
        return b"", b"", (f"preprocessed program is larger than {MAX_PREPROCESSED >> 20} MiB "
                          "(macros that expand without end?)")
    return b"".join(out), b"".join(err), ""


def _parse_cpp_error(line: str, filename: str) -> tuple[Pos, str | None]:
    # cpp reports "file:line:col: error: text" (or fatal error); skip notes/context lines.
    parts = line.split(":", 4)
    if len(parts) >= 5 and "error" in parts[3]:
        f = parts[0] if parts[0] != "<stdin>" else filename
        try:
            return Pos(f, int(parts[1]), int(parts[2])), parts[4].strip()
        except ValueError:
            pass
    if "error" in line:
        return NOPOS, line.strip()
    return NOPOS, None
