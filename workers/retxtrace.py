"""A trace of the Python worker core's retransmissions, for benchmarks/spurious.py (why
workers retransmit on a link that loses nothing).  Off unless the environment variable
`NETSUM_RETX_TRACE` names a directory: the driver then makes `TracingCore`s (the Python core,
even where the compiled one builds), which write one JSON file per call there when the call
ends.  Nothing of it runs on the hot path otherwise.

Per retransmission: when, which slot and use, fast or by timer, how late the timer fired
(the process woke after it was due), the RTO it waited, the estimator (SRTT, RTTVAR, least
RTT), the window, and how long ago this worker last received any result (a silent switch)
or was last called at all.  Per answered retransmitted use: how soon after the last copy the
result came, and whether a STATUS for that use came first (the switch had this worker's
contribution and waited for others').  Every clean RTT sample too (Karn's rule: only of uses
sent once).
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from netsum.wire import HEADER_BYTES
from netsum.workers import wire
from netsum.workers.core import AllreduceResult, WorkerCore

__all__ = ["TracingCore", "trace_dir"]

_SLOT_ROUND = wire.field_reader(("slot", "round"))


def trace_dir() -> Path | None:
    """The directory NETSUM_RETX_TRACE names, or None (tracing off)."""
    d = os.environ.get("NETSUM_RETX_TRACE", "")
    return Path(d) if d else None


class TracingCore(WorkerCore):
    """WorkerCore that records its retransmissions and their answers (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retx_log: list[dict[str, Any]] = []
        self.answer_log: list[dict[str, Any]] = []
        self.rtt_log: list[float] = []
        self._last_rx = -math.inf        # the latest call that brought a result
        self._last_call = -math.inf      # the latest call of any kind
        self._due: np.ndarray | None = None
        self._status_seen: dict[int, tuple[int, float, int]] = {}  # slot -> round, at, bitmap
        self._dumped = False

    def receive_frames(self, payloads: Sequence[memoryview], n: int, now: float) -> list[int]:
        out = super().receive_frames(payloads, n, now)
        self._last_call = now
        return out

    def tick_frames(self, now: float) -> list[int]:
        out = super().tick_frames(now)
        self._last_call = now
        return out

    def _expire(self, now: float, out: list[int]) -> None:
        self._due = self._slots.timer.copy()
        try:
            super()._expire(now, out)
        finally:
            self._due = None

    def on_status(self, payload: memoryview) -> None:
        super().on_status(payload)
        slot, round_ = _SLOT_ROUND(payload)
        bitmap = int.from_bytes(payload[HEADER_BYTES:HEADER_BYTES + 4], "big")
        self._status_seen[slot] = (round_, self._status_at, bitmap)

    def _retransmit(self, i: int, now: float, fast: bool, out: list[int]) -> None:
        due = self._due
        late = float(now - due[i]) if due is not None and not fast else 0.0
        s, rec = self._slots, self._rec
        self.retx_log.append({
            "t": now - self._started, "slot": i, "block": int(s.block[i]),
            "round": s.round[i], "fast": fast, "attempt": s.attempts[i] + 1,
            "waited": now - s.tx_at[i], "age": now - s.first_sent[i],
            "late": late, "srtt": rec.srtt, "rttvar": rec.rttvar,
            "min_rtt": rec.min_rtt if math.isfinite(rec.min_rtt) else None,
            "base_rto": rec.base_rto, "cwnd": rec.cwnd, "in_flight": s.in_flight,
            "since_rx": now - self._last_rx if math.isfinite(self._last_rx) else None,
            "since_call": now - self._last_call if math.isfinite(self._last_call) else None,
        })
        super()._retransmit(i, now, fast, out)

    def _accept(self, i: int, block: int, round_: int, exp: int, flags: int,
                view: memoryview | None, now: float, out: list[int]) -> None:
        self._last_rx = now
        s = self._slots
        if s.attempts[i] == 0:
            self.rtt_log.append(now - s.first_sent[i])
        else:
            st = self._status_seen.get(i)
            status = st is not None and st[0] == round_ and st[1] >= s.tx_at[i]
            self.answer_log.append({
                "t": now - self._started, "slot": i, "block": block,
                "attempts": s.attempts[i], "since_tx": now - s.tx_at[i],
                "age": now - s.first_sent[i], "status": status,
                "bitmap": st[2] if status and st is not None else None,
                "min_rtt": self._rec.min_rtt,
            })
        super()._accept(i, block, round_, exp, flags, view, now, out)

    def result(self) -> AllreduceResult:
        res = super().result()
        d = trace_dir()
        if d is not None and not self._dumped:
            self._dumped = True
            st = res.stats
            doc = {"job": self._job_id, "rank": self._rank, "pid": os.getpid(),
                   "sent": st.packets_sent, "retx": st.retransmissions,
                   "fast": st.fast_retransmissions, "spurious": st.spurious,
                   "elapsed": st.elapsed,
                   "status_frames": self.status_frames, "rtt": self.rtt_log,
                   "retx_log": self.retx_log, "answers": self.answer_log}
            d.mkdir(parents=True, exist_ok=True)
            (d / f"trace-{self._job_id}-{os.getpid()}-{id(self)}.json").write_text(
                json.dumps(doc))
        return res
