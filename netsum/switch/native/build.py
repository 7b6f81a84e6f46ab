"""Compile a generated C module with the machine's C compiler and load it; compiled objects
are cached by a hash of their source (itself a function of the program's JSON and of this
generator), so a program is compiled once per machine.

The module is a CPython extension (the C API is the only binding: no cffi/ctypes layer, so a
packet costs one METH_FASTCALL call).  It needs a C compiler (`$CC`, else `cc`/`gcc`) and
CPython's headers; without either the backend is not offered (`available()` says why).
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from types import ModuleType

__all__ = ["available", "build_module", "is_built", "module_name", "cache_dir", "BuildError",
           "CFLAGS", "IO_CFLAGS"]

CFLAGS = ("-O2", "-shared", "-fPIC", "-std=gnu11", "-fno-strict-aliasing", "-w")
#: The hand-written, program-independent port loop (ioloop.c) is held to -Wall -Wextra
#: (tests/unit/test_switch_ioloop.py compiles it with -Werror); the generated pipelines are
#: built with -w since their code is machine-written.
IO_CFLAGS = ("-O2", "-shared", "-fPIC", "-std=gnu11", "-Wall", "-Wextra")
_LOADED: dict[str, ModuleType] = {}
_BUILDING = threading.Lock()


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
    """$NETSUM_NATIVE_CACHE, else ~/.cache/netsum/native (XDG_CACHE_HOME respected)."""
    d = os.environ.get("NETSUM_NATIVE_CACHE")
    if d:
        return Path(d)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "netsum" / "native"


def _writable_cache() -> Path:
    """The cache directory, or a private temporary one when it cannot be created or written
    (a user without a home directory still gets the backend, compiled once per process)."""
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        if os.access(d, os.W_OK | os.X_OK):
            return d
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="netsum-native-"))


def module_name(source: str, flags: tuple[str, ...] = CFLAGS, prefix: str = "nsw") -> str:
    """The module's name: a hash of everything the compiled object depends on."""
    key = hashlib.sha256("\0".join([source, compiler() or "", " ".join(flags), sys.version,
                                    importlib.machinery.EXTENSION_SUFFIXES[0]])
                         .encode()).hexdigest()[:24]
    return f"{prefix}_{key}"


def _cached(name: str) -> Path:
    return cache_dir() / f"{name}{importlib.machinery.EXTENSION_SUFFIXES[0]}"


def is_built(source: str, flags: tuple[str, ...] = CFLAGS, prefix: str = "nsw") -> bool:
    """Loaded already or compiled in the cache: build_module returns without compiling."""
    name = module_name(source, flags, prefix)
    return name in _LOADED or _cached(name).is_file()


def build_module(source: str, flags: tuple[str, ...] = CFLAGS,
                 prefix: str = "nsw") -> ModuleType:
    """The loaded module of `source`, compiled first unless cached.  Serialised in the
    process (background builds of several pipelines): each module is loaded once."""
    with _BUILDING:
        return _build_module(source, flags, prefix)


def _build_module(source: str, flags: tuple[str, ...], prefix: str) -> ModuleType:
    cc = compiler()
    if cc is None:
        raise BuildError("no C compiler")
    name = module_name(source, flags, prefix)
    if name in _LOADED:
        return _LOADED[name]
    so = _cached(name)
    try:
        if not so.is_file():
            so = _compile(cc, source, name, _writable_cache() / so.name, flags)
        loader = importlib.machinery.ExtensionFileLoader(name, str(so))
        spec = importlib.util.spec_from_file_location(name, str(so), loader=loader)
        assert spec is not None
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
    except (OSError, ImportError, subprocess.SubprocessError) as e:
        raise BuildError(f"{type(e).__name__}: {e}") from e
    _LOADED[name] = mod
    return mod


def _compile(cc: str, source: str, name: str, so: Path, flags: tuple[str, ...]) -> Path:
    """Compile into `so` unless another process did or does: several switches starting at
    once on one program (a test run, a rig) wait for one compiler run instead of each
    spending seconds of CPU on the same module."""
    d = so.parent
    with open(d / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if so.is_file():
            return so
        with tempfile.TemporaryDirectory(dir=d) as tmp:
            c = Path(tmp) / f"{name}.c"
            c.write_text(f'#define MODNAME "{name}"\n#define MODINIT PyInit_{name}\n' + source)
            out = Path(tmp) / so.name
            cmd = [cc, *flags, f"-I{sysconfig.get_paths()['include']}", "-o", str(out), str(c)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                lines = (r.stderr or r.stdout).strip().splitlines()
                raise BuildError("C compiler failed: " + " | ".join(lines[:6]))
            os.replace(out, so)          # atomic: concurrent builds of one program agree
    return so
