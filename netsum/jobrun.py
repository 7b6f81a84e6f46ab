"""One running all-reduce job of the rig and its outcome.

Owns: waiting for the worker processes (with an optional overall timeout and a periodic tick for
progress displays), reading each netsum-worker's JSON statistics and error line from its log,
checking each worker's result file against the reference (netsum.tensors), and the outcome
records.  Progress comes from the switch's per-job counters, through a callable the rig passes
in (this module knows nothing of the controller).
"""
from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from netsum.procs import Child
from netsum.tensors import Reference, check_result

__all__ = ["WorkerOutcome", "JobOutcome", "RunningJob"]


@dataclass(frozen=True, slots=True)
class WorkerOutcome:
    rank: int
    ok: bool
    returncode: int | None
    error: str                  # "" when ok: the worker's own error line, or the check's finding
    elements: int
    elapsed_s: float
    goodput: float              # tensor elements per second
    packets_sent: int
    retransmissions: int
    latency_p50_ms: float
    latency_p99_ms: float
    max_error: float
    error_ratio: float          # worst |error| / allowed error (<= 1 when correct)


@dataclass(frozen=True, slots=True)
class JobOutcome:
    job_id: int
    elements: int
    shape: tuple[int, ...]
    wall_s: float
    workers: tuple[WorkerOutcome, ...]
    switch_counters: dict[str, int]
    # Each worker's result, in rank order, when the wait was asked to keep them (else empty).
    results: tuple[np.ndarray, ...] = field(default=(), compare=False, repr=False)
    # What the switches say after the job (netsum.health, filled in by the rig): faults found
    # (an internal error with its first message, a nonzero refusal counter), and the figures
    # checked, for display.
    problems: tuple[str, ...] = ()
    health: str = ""
    # Why the job ran on the host ring fallback (netsum.workers.ring) instead of the switch: the
    # controller's refusal ("" for a job that ran where it was asked to).
    fallback: str = ""

    @property
    def ok(self) -> bool:
        """Every worker's sum is right and no switch counted a fault."""
        return all(w.ok for w in self.workers) and not self.problems


class RunningJob:
    """A job whose workers are running.  `progress()` reads the switch's per-job counters;
    `wait()` collects and checks the results.  Tests may kill `children[i]` to fail a worker."""

    def __init__(self, counters: Callable[[int], dict[str, int]], job_id: int,
                 children: list[Child], ref: Reference, in_paths: list[Path],
                 out_paths: list[Path], blocks: int, window: int, started: float,
                 inputs_per_slot: int | None = None) -> None:
        self.counters = counters
        self.job_id = job_id
        self.children = children
        self.ref = ref
        self.in_paths = in_paths
        self.out_paths = out_paths
        # Packets the switch(es) count as data_in per use of a slot: one per worker (in a tree
        # the leaves also count the root's result coming down).
        per_slot = len(children) if inputs_per_slot is None else inputs_per_slot
        self.expected_contributions = per_slot * (blocks + window)
        self.started = started
        self.fallback = ""        # set by the rig when the job runs on the host fallback

    def progress(self) -> float:
        """Fraction of the job's first transmissions the switch has seen (0..1)."""
        row = self.counters(self.job_id)
        seen = row.get("data_in", 0) - row.get("retx", 0)
        return max(0.0, min(1.0, seen / max(1, self.expected_contributions)))

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def done(self) -> bool:
        return not any(c.alive() for c in self.children)

    def wait(self, timeout: float | None = None,
             on_tick: Callable[["RunningJob"], None] | None = None,
             tick: float = 0.5, keep_results: bool = False) -> JobOutcome:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done():
            if deadline is not None and time.monotonic() > deadline:
                for c in self.children:
                    if c.alive():
                        c.popen.kill()
                break
            if on_tick is not None:
                on_tick(self)
            for c in self.children:
                try:
                    c.popen.wait(tick / len(self.children))
                except subprocess.TimeoutExpired:
                    pass
        for c in self.children:
            c.popen.wait()
        wall = time.monotonic() - self.started
        outcomes = tuple(self._outcome(r, c) for r, c in enumerate(self.children))
        kept: tuple[np.ndarray, ...] = ()
        if keep_results:
            kept = tuple(np.load(p, allow_pickle=False) if w.ok else np.empty(0)
                         for p, w in zip(self.out_paths, outcomes))
        # The tensors can be hundreds of MB each: keep the logs, not the data.
        for path in (*self.in_paths, *self.out_paths):
            path.unlink(missing_ok=True)
        return JobOutcome(self.job_id, int(self.ref.total.size), self.ref.shape, wall, outcomes,
                          self.counters(self.job_id), kept, fallback=self.fallback)

    def _outcome(self, rank: int, child: Child) -> WorkerOutcome:
        rc = child.popen.returncode
        text = child.log_path.read_text(errors="replace") if child.log_path else ""
        stats: dict[str, object] = {}
        errors = []
        for line in text.splitlines():
            if line.startswith("{"):
                try:
                    stats = json.loads(line)
                except ValueError:
                    errors.append(line)
            elif "error" in line or "interrupted" in line:
                errors.append(line.strip())
        ok = rc == 0
        err = "; ".join(errors)
        if rc is not None and rc < 0:
            err = err or f"killed by signal {-rc}"
        elif rc != 0 and not err:
            err = f"exit status {rc}: {text.strip().splitlines()[-1:] or 'no output'}"
        max_error = ratio = float("nan")
        if ok:
            try:
                result = np.load(self.out_paths[rank], allow_pickle=False)
            except (OSError, ValueError) as exc:
                ok, err = False, f"no result file: {exc}"
            else:
                v = check_result(result, self.ref)
                ok, err, max_error, ratio = v.ok, v.problem, v.max_error, v.worst_ratio

        def num(key: str) -> float:
            value = stats.get(key)
            return float(value) if isinstance(value, (int, float)) else float("nan")

        def count(key: str) -> int:
            value = stats.get(key)
            return int(value) if isinstance(value, int) else 0

        return WorkerOutcome(rank, ok, rc, err, int(self.ref.total.size), num("elapsed_s"),
                             num("elements_per_s"), count("packets_sent"),
                             count("retransmissions"),
                             num("chunk_latency_p50_ms"), num("chunk_latency_p99_ms"),
                             max_error, ratio)
