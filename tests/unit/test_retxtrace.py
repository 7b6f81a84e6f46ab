"""The retransmission trace (workers/retxtrace.py) that benchmarks/spurious.py classifies:
what it records of a timer's retransmission and of its answer, hand-timed, and that the
driver makes traced cores only when NETSUM_RETX_TRACE is set."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from netsum.wire import Flags, MsgType
from netsum.workers import wire
from netsum.workers.core import JobConfig, Timing
from netsum.workers.retxtrace import TracingCore, trace_dir


def _result_for(data: bytes, k: int) -> bytes:
    """A one-worker job's switch: the sum is the contribution itself."""
    pkt = wire.decode(data, k)
    h = pkt.header
    head = wire.Header(msg_type=MsgType.RESULT, flags=Flags.NONE, job_id=h.job_id,
                       round=h.round, slot=h.slot, exp=h.exp, count=1, offset=h.offset)
    return wire.encode(head, pkt.values, k)


def test_a_timer_retransmission_and_its_answer_are_traced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slot 0 answers at 3 ms (the one clean RTT sample); slot 1's bootstrap, timed at 4 ms,
    is sent again by a tick 2 ms late and answered 0.5 ms after: the trace has that wait,
    lateness and answer, and the file written when the result is taken."""
    monkeypatch.setenv("NETSUM_RETX_TRACE", str(tmp_path))
    assert trace_dir() == tmp_path
    k = 32
    timing = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.1, progress_deadline=2.0,
                    adaptive=False, fast_retransmit=0)
    core = TracingCore(np.ones(2 * k, np.float32), JobConfig(5, 1, 2, k), timing)
    boot = core.start(0.0).send
    block0 = core.receive(_result_for(boot[0], k), 0.003).send
    retx = core.tick(0.006).send
    assert [wire.decode_header(p, k).slot for p in retx] == [1]
    (r,) = core.retx_log
    assert (r["slot"], r["fast"], r["attempt"]) == (1, False, 1)
    assert r["waited"] == pytest.approx(0.006) and r["late"] == pytest.approx(0.002)
    assert r["since_rx"] == pytest.approx(0.003) and r["min_rtt"] == pytest.approx(0.003)
    block1 = core.receive(_result_for(boot[1], k), 0.0065).send
    (a,) = core.answer_log
    assert (a["slot"], a["attempts"], a["status"]) == (1, 1, False)
    assert a["since_tx"] == pytest.approx(0.0005) and a["age"] == pytest.approx(0.0065)
    assert core.rtt_log == [pytest.approx(0.003)]
    for p in block0 + block1:
        core.receive(_result_for(p, k), 0.007)
    core.result()
    (f,) = tmp_path.glob("trace-5-*.json")
    doc = json.loads(f.read_text())
    assert (doc["retx"], len(doc["retx_log"]), doc["spurious"]) == (1, 1, 1)


def test_no_trace_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NETSUM_RETX_TRACE", raising=False)
    assert trace_dir() is None
