"""netsum.lifecycle.Started: what a half-started object undoes, and when."""
from __future__ import annotations

import pytest

from netsum.lifecycle import Started


class Thing(Started):
    def __init__(self, fail: bool) -> None:
        self.fail, self.calls = fail, []

    def start(self) -> None:
        self.calls.append("start")
        if self.fail:
            raise OSError("port in use")

    def close(self) -> None:
        self.calls.append("close")


def test_a_failed_start_closes_what_started_and_raises() -> None:
    t = Thing(fail=True)
    with pytest.raises(OSError, match="port in use"):
        with t:
            raise AssertionError("the block must not run")
    assert t.calls == ["start", "close"]


def test_the_block_runs_between_start_and_close_even_when_it_raises() -> None:
    t = Thing(fail=False)
    with pytest.raises(KeyError):
        with t as same:
            assert same is t and t.calls == ["start"]
            raise KeyError("x")
    assert t.calls == ["start", "close"]


def test_the_orchestrators_use_it() -> None:
    from netsum.experiments.testbed import Testbed
    from netsum.experiments.trainbed import TrainBed
    from netsum.rig import Rig
    from netsum.tools.stf.target import NetsumSwitch
    assert all(issubclass(c, Started) for c in (Rig, Testbed, TrainBed, NetsumSwitch))
