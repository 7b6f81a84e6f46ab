"""Which collectives went through the switch and which did not, per run (torch-free).

Nothing bypasses the switch silently: every collective the backend or the hook sees is
counted here under one of three routes, with its calls and bytes (the tensors' own bytes, in
their dtype):

* `switch`: summed by the switch (all-reduce);
* `switch (all-reduce)`: a reduce-scatter done as an all-reduce through the switch, the rank
  keeping its shard -- correct, but each downlink carries the whole tensor, not its shard
  (the in-network reduce-scatter needs the v2 header's dest field);
* `gloo`: delegated, with the reason; the first delegation of each (collective, reason) is
  logged once (logger "netsum.training") at WARNING;

and `local` for calls with nothing to send (empty tensors).  `summary()` is the per-run line
the backend logs at close and `netsum train` prints; `to_dict()` goes into metrics.json.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

__all__ = ["CommLedger", "Tally", "SWITCH", "SWITCH_SCATTER", "SWITCH_ALLREDUCE", "GLOO",
           "LOCAL", "SWITCHED", "log"]

log = logging.getLogger("netsum.training")

SWITCH = "switch"
#: a reduce-scatter in the network: each block's sum to its owner only
SWITCH_SCATTER = "switch (reduce-scatter)"
#: a reduce-scatter as an all-reduce of the whole input (when the engine cannot scatter)
SWITCH_ALLREDUCE = "switch (all-reduce)"
GLOO = "gloo"
LOCAL = "local"
SWITCHED = (SWITCH, SWITCH_SCATTER, SWITCH_ALLREDUCE)
_ROUTES = (*SWITCHED, GLOO, LOCAL)


@dataclass(slots=True)
class Tally:
    calls: int = 0
    bytes: int = 0


class CommLedger:
    """Counts per (collective, route); thread-safe (lane threads never write it, but user
    threads may issue collectives concurrently)."""

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank
        self._tally: dict[tuple[str, str], Tally] = {}
        self._said: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def add(self, collective: str, route: str, nbytes: int, why: str = "") -> None:
        if route not in _ROUTES:
            raise ValueError(f"route {route!r} is not one of {_ROUTES}")
        with self._lock:
            t = self._tally.setdefault((collective, route), Tally())
            t.calls += 1
            t.bytes += nbytes
            first = route == GLOO and (collective, why) not in self._said
            if first:
                self._said.add((collective, why))
        if first:
            log.warning("netsum rank %d: %s delegated to gloo (%s); said once, counted in "
                        "the run's summary", self.rank, collective, why or "not through the "
                        "switch")

    def switched(self, collective: str, nbytes: int, how: str = SWITCH) -> None:
        self.add(collective, how, nbytes)

    def delegated(self, collective: str, nbytes: int, why: str) -> None:
        self.add(collective, GLOO, nbytes, why)

    def totals(self) -> dict[str, Tally]:
        """Per route, over every collective."""
        out = {r: Tally() for r in _ROUTES}
        with self._lock:
            for (_, route), t in self._tally.items():
                out[route].calls += t.calls
                out[route].bytes += t.bytes
        return out

    def to_dict(self) -> dict[str, dict[str, dict[str, int]]]:
        """{collective: {route: {"calls": n, "bytes": b}}}"""
        out: dict[str, dict[str, dict[str, int]]] = {}
        with self._lock:
            for (name, route), t in sorted(self._tally.items()):
                out.setdefault(name, {})[route] = {"calls": t.calls, "bytes": t.bytes}
        return out

    def log_summary(self) -> None:
        """The run's summary in the log: WARNING when something went to gloo, else INFO."""
        if self.totals()[GLOO].calls:
            log.warning("%s", self.summary())
        else:
            log.info("%s", self.summary())

    def summary(self) -> str:
        tot = self.totals()
        sw = sum(tot[r].calls for r in SWITCHED)
        swb = sum(tot[r].bytes for r in SWITCHED)
        parts = [f"switched {sw} calls {_size(swb)}"]
        if tot[SWITCH_SCATTER].calls:
            parts[0] += f" (of which {tot[SWITCH_SCATTER].calls} reduce-scatter in the network)"
        if tot[SWITCH_ALLREDUCE].calls:
            parts[0] += (f" (of which {tot[SWITCH_ALLREDUCE].calls} reduce-scatter as "
                         "all-reduce)")
        parts.append(f"delegated to gloo {tot[GLOO].calls} calls {_size(tot[GLOO].bytes)}")
        with self._lock:
            gloo = sorted((n, t.calls) for (n, r), t in self._tally.items() if r == GLOO)
        if gloo:
            parts[-1] += " (" + ", ".join(f"{n} {c}" for n, c in gloo) + ")"
        if tot[LOCAL].calls:
            parts.append(f"{tot[LOCAL].calls} empty calls")
        return f"netsum rank {self.rank}: " + "; ".join(parts)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
