"""netsum.controller.watchdog's stuck rule on scripted counter readings (a virtual clock): a job is
stuck when retransmissions keep arriving and no RESULT went out for `stuck_after` seconds;
an idle job or a straggler that comes back is never stuck (docs/reliability.md).  The end-to-end
reclaim (real switch, controller, workers) is tests/e2e/test_failures.py."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from netsum.controller.errors import ControllerError
from netsum.controller.watchdog import Watchdog


@dataclass
class Counters:
    """Stands in for the Controller: job_stats() rows as the real one returns them."""
    now: float = 0.0
    results: dict[int, int] = field(default_factory=dict)
    retx: dict[int, int] = field(default_factory=dict)

    def job_stats(self) -> list[dict[str, object]]:
        return [{"job": j, "switch": "s1", "results_out": self.results[j],
                 "retx": self.retx.get(j, 0)} for j in sorted(self.results)]


def dog(c: Counters, after: float = 6.0) -> Watchdog:
    return Watchdog(c, after, clock=lambda: c.now)  # type: ignore[arg-type]


def advance(c: Counters, w: Watchdog, seconds: float, retx_per_s: int = 0,
            results_per_s: int = 0, job: int = 7) -> dict[int, str]:
    """Poll every 0.2 s for `seconds`; the last poll's verdict."""
    out: dict[int, str] = {}
    for _ in range(round(seconds / 0.2)):
        c.now += 0.2
        c.retx[job] = c.retx.get(job, 0) + round(retx_per_s * 0.2)
        c.results[job] += round(results_per_s * 0.2)
        out = w.stuck()
    return out


def test_retransmissions_without_results_for_the_timeout_is_stuck() -> None:
    c = Counters(results={7: 100})
    w = dog(c)
    assert advance(c, w, 2.0, results_per_s=500) == {}        # running
    assert advance(c, w, 5.8, retx_per_s=50) == {}            # a worker died 5.8 s ago
    got = advance(c, w, 0.4, retx_per_s=50)
    assert list(got) == [7] and "no RESULT on s1 for 6." in got[7]


def test_an_idle_job_is_never_stuck() -> None:
    """Between training steps: no packets at all, for as long as it takes."""
    c = Counters(results={7: 100})
    w = dog(c)
    advance(c, w, 1.0, results_per_s=500)
    assert advance(c, w, 600.0) == {}


def test_a_straggler_that_comes_back_is_not_stuck() -> None:
    c = Counters(results={7: 0})
    w = dog(c)
    advance(c, w, 1.0, results_per_s=500)
    assert advance(c, w, 5.0, retx_per_s=80) == {}            # paused 5 s < 6 s
    assert advance(c, w, 0.2, results_per_s=500) == {}        # results again
    assert advance(c, w, 5.8, retx_per_s=80) == {}            # the watch restarted there


def test_retransmissions_stopping_keep_a_stuck_job_stuck() -> None:
    """The survivors give up (their deadline) before the timeout: retransmissions after the last
    RESULT still mark the job, so it is reclaimed although nothing arrives any more."""
    c = Counters(results={7: 10})
    w = dog(c)
    advance(c, w, 0.4, results_per_s=100)
    advance(c, w, 5.0, retx_per_s=40)
    assert list(advance(c, w, 1.2)) == [7]


def test_counters_going_down_restart_the_watch() -> None:
    """A switch restart (or job reset) zeroes the counters: the watch starts over."""
    c = Counters(results={7: 500}, retx={7: 30})
    w = dog(c)
    advance(c, w, 4.0, retx_per_s=50)
    c.results[7], c.retx[7] = 0, 0
    assert advance(c, w, 5.8, retx_per_s=50) == {}
    assert list(advance(c, w, 0.6, retx_per_s=50)) == [7]    # 6 s after the restart


def test_jobs_are_watched_apart() -> None:
    c = Counters(results={3: 0, 7: 0})
    w = dog(c)
    for _ in range(35):
        c.now += 0.2
        c.results[3] += 100                    # job 3 runs
        c.retx[7] = c.retx.get(7, 0) + 5       # job 7 is stuck
        got = w.stuck()
    assert list(got) == [7]


@pytest.mark.parametrize("after", [0.0, -1.0, float("nan"), float("inf")])
def test_a_timeout_must_be_positive_and_finite(after: float) -> None:
    # NaN compares false with everything: `after <= 0` let it through and nothing was stuck.
    with pytest.raises(ControllerError, match="must be > 0"):
        dog(Counters(), after)
