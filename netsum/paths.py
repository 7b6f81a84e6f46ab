"""Where netsum's files live: the repository root, P4 sources and build outputs.

NETSUM_P4_DIR (tests only) points the P4 build at another copy of p4/ -- the mutation check
(tests/e2e/test_mutants.py) runs end-to-end tests against deliberately broken copies of
netsum.p4 that way; their outputs then go to <that dir>-build beside it, never into build/p4.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT", "P4_DIR", "BUILD_DIR", "P4_BUILD_DIR"]

ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = ROOT / "build"
_OVERRIDE = os.environ.get("NETSUM_P4_DIR")
P4_DIR = Path(_OVERRIDE).resolve() if _OVERRIDE else ROOT / "p4"
P4_BUILD_DIR = P4_DIR.parent / f"{P4_DIR.name}-build" if _OVERRIDE else BUILD_DIR / "p4"
