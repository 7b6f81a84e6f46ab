"""Where netsum's files live: the repository root, P4 sources and build outputs."""
from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT", "P4_DIR", "BUILD_DIR", "P4_BUILD_DIR"]

ROOT = Path(__file__).resolve().parents[1]
P4_DIR = ROOT / "p4"
BUILD_DIR = ROOT / "build"
P4_BUILD_DIR = BUILD_DIR / "p4"
