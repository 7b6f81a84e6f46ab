"""Compile a generated C module with the machine's C compiler and load it; compiled objects
are cached by a hash of their source (itself a function of the program's JSON and of this
generator), so a program is compiled once per machine.

The module is a CPython extension (the C API is the only binding: no cffi/ctypes layer, so a
packet costs one METH_FASTCALL call).  It needs a C compiler (`$CC`, else `cc`/`gcc`) and
CPython's headers; without either the backend is not offered (`available()` says why).
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

__all__ = ["available", "build_module", "cache_dir", "BuildError", "CFLAGS"]

CFLAGS = ("-O2", "-shared", "-fPIC", "-std=gnu11", "-fno-strict-aliasing", "-w")
_LOADED: dict[str, ModuleType] = {}


class BuildError(Exception):
    """The C compiler failed or is missing; the message has its first lines of output."""


def compiler() -> str | None:
    cc = os.environ.get("CC")
    if cc:
        return shutil.which(cc)
    return shutil.which("cc") or shutil.which("gcc")


def available() -> str | None:
    """None when the backend can be built here, else the reason it cannot."""
    if compiler() is None:
        return "no C compiler (cc/gcc, or $CC) on PATH"
    inc = Path(sysconfig.get_paths()["include"])
    if not (inc / "Python.h").is_file():
        return f"no CPython headers ({inc}/Python.h)"
    return None


def cache_dir() -> Path:
    d = os.environ.get("NETSUM_NATIVE_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "netsum" / "native"


def build_module(source: str) -> ModuleType:
    cc = compiler()
    if cc is None:
        raise BuildError("no C compiler")
    ext = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = hashlib.sha256("\0".join([source, cc, " ".join(CFLAGS), sys.version, ext])
                         .encode()).hexdigest()[:24]
    name = f"nsw_{key}"
    if name in _LOADED:
        return _LOADED[name]
    d = cache_dir()
    so = d / f"{name}{ext}"
    if not so.is_file():
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=d) as tmp:
            c = Path(tmp) / f"{name}.c"
            c.write_text(f'#define MODNAME "{name}"\n#define MODINIT PyInit_{name}\n' + source)
            out = Path(tmp) / so.name
            cmd = [cc, *CFLAGS, f"-I{sysconfig.get_paths()['include']}", "-o", str(out), str(c)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                lines = (r.stderr or r.stdout).strip().splitlines()
                raise BuildError("C compiler failed: " + " | ".join(lines[:6]))
            os.replace(out, so)          # atomic: concurrent builds of one program agree
    loader = importlib.machinery.ExtensionFileLoader(name, str(so))
    spec = importlib.util.spec_from_file_location(name, str(so), loader=loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    _LOADED[name] = mod
    return mod
