"""Shared pytest fixtures: where things are, and tier gates (privileged tests skip with a reason)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Real p4c 1.2.5.16 output for the project's own small programs, committed as data
#: (tests/fixtures/p4c/README.md), so a clone alone runs every test that compares with p4c.
P4C_FIXTURES = ROOT / "tests" / "fixtures" / "p4c"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def p4c_fixtures() -> Path:
    return P4C_FIXTURES


def privileged_skip_reason() -> str | None:
    """None when namespaces/veth can be made here; otherwise why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth)"
    if shutil.which("ip") is None:
        return "needs iproute2 (`ip`)"
    return None


@pytest.fixture
def privileged() -> None:
    reason = privileged_skip_reason()
    if reason:
        pytest.skip(reason)
