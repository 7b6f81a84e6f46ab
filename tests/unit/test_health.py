"""netsum.health: what a run fails on after every job, and where its figures come from: the
embedded switch's GetStats (device statistics and the first internal error's message, kept by
the Device when an exception escapes the packet path) and the job's refusal counters."""
from __future__ import annotations

import pytest

from netsum.controller import program as P
from netsum.p4rt.client import Endpoint
from helpers import embedded_server
from netsum import health
from netsum.jobrun import JobOutcome


def test_clean_switch_has_no_problems() -> None:
    h = health.SwitchHealth("s1", {k: 0 for k in health.SHOULD_BE_ZERO} | {"rx_packets": 9},
                            None, {c: 0 for c in P.REFUSALS})
    assert health.problems([h]) == []
    text = health.summary([h])
    assert "internal_errors 0" in text and "drop_non_member 0" in text and "rx_packets" not in text


def test_problems_name_the_fault_and_the_first_error() -> None:
    h = health.SwitchHealth("s1", {"internal_errors": 2, "udp_foreign": 5, "dropped": 40},
                            "KeyError: 'x' at tables.py:10 (processing a frame)",
                            {"drop_non_member": 3, "drop_stale": 0})
    assert health.problems([h]) == [
        "switch s1: 2 internal errors, the first: KeyError: 'x' at tables.py:10 (processing a "
        "frame)",
        "switch s1: udp_foreign 5",
        "switch s1: refused drop_non_member 3"]


def test_target_without_statistics_still_checks_refusals() -> None:
    h = health.SwitchHealth("s1", None, None, {"drop_bad_slot": 1})
    assert health.problems([h]) == ["switch s1: refused drop_bad_slot 1"]
    assert "not served by this target" in health.summary([h])


def test_a_problem_fails_the_job_even_with_every_sum_right() -> None:
    out = JobOutcome(1, 0, (0,), 0.0, (), {}, problems=("switch s1: refused drop_stale 1",))
    assert not out.ok
    assert JobOutcome(1, 0, (0,), 0.0, (), {}).ok


def test_first_internal_error_is_kept_and_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception on the packet path costs the packet, is counted, and its message (type,
    where, which frame) is what GetStats returns; the second one is only counted."""
    from netsum.switch.v1model import V1Model

    calls = []

    def broken(self: object, port: int, frame: bytes, out: list) -> None:  # type: ignore[type-arg]
        calls.append(port)
        raise ZeroDivisionError("lane 7")

    with embedded_server(0) as (dev, srv):
        from netsum.build import ensure_built
        dev.install(dev.build_pipeline(ensure_built(32)[0].read_bytes()))
        monkeypatch.setattr(V1Model, "process", broken)
        assert dev.process(3, b"\x00" * 60) == []
        assert dev.process(4, b"\x00" * 61) == []
        got = health.read_switch("s1", Endpoint(f"127.0.0.1:{srv.port}", 0), {})
    assert calls == [3, 4]
    assert got.stats is not None and got.stats["internal_errors"] == 2
    assert got.first_error is not None
    assert got.first_error.startswith("ZeroDivisionError: lane 7 at test_health.py:")
    assert got.first_error.endswith("(processing a 60-byte frame from port 3)")
    assert "2 internal errors, the first: ZeroDivisionError: lane 7" in health.problems([got])[0]


def test_an_embedded_switch_that_does_not_answer_is_a_fault() -> None:
    from helpers import free_port
    got = health.read_switch("s9", Endpoint(f"127.0.0.1:{free_port()}", 0), {}, timeout=1.0)
    assert got.stats is None and got.unreadable is not None
    assert health.problems([got]) == [f"switch s9: cannot read its statistics: {got.unreadable}"]
