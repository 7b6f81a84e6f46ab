"""Shared pytest fixtures: where things are, and tier gates (privileged tests skip with a reason)."""
from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
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


@pytest.fixture
def lab(privileged: None) -> Iterator[object]:
    """A NetnsLab (network namespaces and veths), removed after the test; skips without
    the privileges or the kernel support."""
    from netsum.netns import NetnsLab, netns_available

    reason = netns_available()
    if reason:
        pytest.skip(reason)
    with NetnsLab() as lab:
        yield lab


UNIT = ROOT / "tests" / "unit"


@pytest.fixture(autouse=True)
def _unit_tier_on_the_python_path(request: pytest.FixtureRequest,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests build hundreds of small programs through Device.build_pipeline, whose
    automatic choice would compile each one's native module (netsum/switch/native) in the
    background: the unit tier tests the Python path (the reference), and
    test_switch_native asks for the native backend explicitly and compares the two.  The
    end-to-end tiers keep the automatic choice (daemons, P4Runtime).  NETSUM_NATIVE set in
    the environment (e.g. =1) overrides this."""
    if "NETSUM_NATIVE" not in os.environ and UNIT in Path(str(request.node.path)).parents:
        monkeypatch.setenv("NETSUM_NATIVE", "0")


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches the processes the tests start, however the suite itself was started.

    A suite run in the background of a non-interactive shell (`make test &` in a script)
    inherits SIGINT ignored, and an ignored disposition survives exec: the demo, sweep and
    controller the Ctrl-C tests interrupt would then never see the signal and run to the end.
    A Python handler is reset to the default across exec, so every child starts as from a
    terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
