"""Where netsum's files live: P4 sources and build outputs, in a checkout or an installed wheel.

The P4 sources are package data (`netsum/programs`, which in a checkout is a link to the
top-level p4/ folder), so an installed netsum finds netsum.p4 wherever it is installed.  Builds
go to the checkout's build/ when netsum runs from a checkout (a pyproject.toml beside the
package), else to a per-user cache ($XDG_CACHE_HOME/netsum or ~/.cache/netsum): site-packages
may not be writable.  NETSUM_BUILD_DIR overrides both.

NETSUM_P4_DIR (tests only) points the P4 build at another copy of p4/ -- the mutation check
(tests/e2e/test_mutants.py) runs end-to-end tests against deliberately broken copies of
netsum.p4 that way; their outputs then go to <that dir>-build beside it, never into build/p4.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PACKAGE", "CHECKOUT", "P4_DIR", "BUILD_DIR", "P4_BUILD_DIR"]

#: The netsum package directory.
PACKAGE = Path(__file__).resolve().parent
#: The repository root when netsum runs from a checkout, else None (an installed wheel).
CHECKOUT: Path | None = PACKAGE.parent if (PACKAGE.parent / "pyproject.toml").is_file() else None


def _build_dir() -> Path:
    if os.environ.get("NETSUM_BUILD_DIR"):
        return Path(os.environ["NETSUM_BUILD_DIR"]).resolve()
    if CHECKOUT is not None:
        return CHECKOUT / "build"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "netsum" / "build"


BUILD_DIR = _build_dir()
_OVERRIDE = os.environ.get("NETSUM_P4_DIR")
P4_DIR = Path(_OVERRIDE).resolve() if _OVERRIDE else PACKAGE / "programs"
P4_BUILD_DIR = P4_DIR.parent / f"{P4_DIR.name}-build" if _OVERRIDE else BUILD_DIR / "p4"
