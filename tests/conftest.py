"""Shared pytest fixtures: where things are, and tier gates (privileged tests skip with a reason)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Real p4c output for two programs; lives beside the project (../shared/fixtures/p4c), or where
#: NETSUM_P4C_FIXTURES points (the unprivileged CI tier runs from a private clone elsewhere).
P4C_FIXTURES = Path(os.environ.get("NETSUM_P4C_FIXTURES")
                    or ROOT.parent / "shared" / "fixtures" / "p4c")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def p4c_fixtures() -> Path:
    if not P4C_FIXTURES.is_dir():
        pytest.skip(f"real p4c fixtures not found at {P4C_FIXTURES} (they sit beside the project "
                    "in development and CI)")
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
