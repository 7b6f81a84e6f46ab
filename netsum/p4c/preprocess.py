"""The C preprocessor stage: runs the system ``cpp`` like p4c does.

Keeps line markers (``# N "file"``) in the output so the lexer can map every token back to
its original file and line.  Our own ``core.p4``/``v1model.p4`` live in ``p4include/`` and are
found through ``-I`` like p4c's installed include directory.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from .diagnostics import NOPOS, Diagnostics, Pos

__all__ = ["INCLUDE_DIR", "preprocess"]

INCLUDE_DIR = Path(__file__).resolve().parent / "p4include"


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
    """Return the preprocessed text (with line markers) or None after reporting an error."""
    argv = _cpp_argv("-", include_dirs, defines)
    # cpp names stdin "<stdin>"; tell it the real name through a leading line marker so
    # positions and relative #include "x.p4" keep working.
    parent = str(Path(filename).resolve().parent) if filename != "<string>" else None
    if parent:
        argv[-1:-1] = ["-I", parent]
    source = f'# 1 "{filename}"\n' + text
    try:
        proc = subprocess.run(argv, input=source, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        diags.error(NOPOS, f"cannot run the C preprocessor ({argv[0]}): {exc}")
        return None
    if proc.returncode != 0:
        for line in proc.stderr.splitlines():
            pos, msg = _parse_cpp_error(line, filename)
            if msg is not None:
                diags.error(pos, msg)
        if not diags.errors:
            diags.error(NOPOS, f"preprocessor failed: {proc.stderr.strip()}")
        return None
    return proc.stdout


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
