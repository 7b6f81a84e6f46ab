"""Telemetry while a job runs: interface counters and per-job P4 counters, sampled over time.

Owns:
- reading a network namespace's interface counters from `/proc/<pid>/net/dev` (any process in
  the namespace will do: a Mininet host's shell, a `ip netns exec` child; `/proc/self/net/dev`
  is the root namespace, where the switch-side ends of the links live);
- `Sampler`, a background thread that samples a set of interfaces every `interval` seconds and
  a callable returning P4 counters (the controller's per-job rows) every `p4_interval`, with a
  timestamp relative to `start()`;
- `Telemetry`, what a sampler recorded: rates per interval, totals, and rows for a CSV in long
  format (run, t_s, source, node, item, metric, value).

The switch's ports are kernel interfaces (veths) in Mininet and in the rig's netns mode: what
the switch process sent and received on a port is what the kernel counted on that interface.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["IfCounters", "read_net_dev", "Interface", "Sample", "Telemetry", "Sampler",
           "IF_METRICS"]

IF_METRICS = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets", "rx_dropped", "tx_dropped")


@dataclass(frozen=True, slots=True)
class IfCounters:
    rx_bytes: int = 0
    rx_packets: int = 0
    rx_dropped: int = 0
    tx_bytes: int = 0
    tx_packets: int = 0
    tx_dropped: int = 0

    def __sub__(self, other: "IfCounters") -> "IfCounters":
        return IfCounters(*(getattr(self, m) - getattr(other, m) for m in _ORDER))


_ORDER = ("rx_bytes", "rx_packets", "rx_dropped", "tx_bytes", "tx_packets", "tx_dropped")


def read_net_dev(path: str | Path = "/proc/self/net/dev") -> dict[str, IfCounters]:
    """Counters of every interface in the namespace `path` belongs to.  /proc/net/dev columns:
    receive bytes packets errs drop fifo frame compressed multicast, then transmit bytes
    packets errs drop fifo colls carrier compressed."""
    out: dict[str, IfCounters] = {}
    with open(path) as fh:
        lines = fh.read().splitlines()[2:]
    for line in lines:
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        v = rest.split()
        if len(v) < 16:
            continue
        out[name.strip()] = IfCounters(int(v[0]), int(v[1]), int(v[3]), int(v[8]), int(v[9]),
                                       int(v[11]))
    return out


@dataclass(frozen=True, slots=True)
class Interface:
    """One interface to sample: `node` (host or switch name), the interface name, the
    /proc/<pid>/net/dev of its namespace, and the link it belongs to (for plots)."""
    node: str
    name: str
    net_dev: str
    link: str = ""


@dataclass(frozen=True, slots=True)
class Sample:
    t: float                                   # seconds since Sampler.start()
    interfaces: dict[tuple[str, str], IfCounters]   # (node, interface) -> counters
    p4: tuple[dict[str, object], ...] = ()     # P4 counter rows, when sampled this time


@dataclass
class Telemetry:
    interfaces: tuple[Interface, ...]
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall0: float = 0.0          # wall-clock time (time.time()) of sample time 0

    def totals(self) -> dict[tuple[str, str], IfCounters]:
        """Counter growth of each interface from the first to the last sample."""
        if len(self.samples) < 2:
            return {}
        first, last = self.samples[0].interfaces, self.samples[-1].interfaces
        return {key: last[key] - first[key] for key in last if key in first}

    def rates(self, node: str, name: str, metric: str = "tx_bytes") -> list[tuple[float, float]]:
        """(mid-interval time, metric per second) for each sampling interval."""
        key = (node, name)
        out = []
        for a, b in zip(self.samples, self.samples[1:]):
            if key in a.interfaces and key in b.interfaces and b.t > a.t:
                delta = getattr(b.interfaces[key], metric) - getattr(a.interfaces[key], metric)
                out.append(((a.t + b.t) / 2, delta / (b.t - a.t)))
        return out

    def last_p4(self) -> tuple[dict[str, object], ...]:
        for s in reversed(self.samples):
            if s.p4:
                return s.p4
        return ()

    def rows(self, run: str, origin: float | None = None,
             metrics: Sequence[str] = IF_METRICS) -> list[tuple[object, ...]]:
        """Long-format rows: (run, t_s, source, node, item, metric, value).  Interface values
        are counted from the first sample; P4 values are the counters as read.  `origin`, a
        wall-clock time, becomes t = 0 (e.g. when the workers were told to begin)."""
        out: list[tuple[object, ...]] = []
        if not self.samples:
            return out
        shift = 0.0 if origin is None else origin - self.wall0
        base = self.samples[0].interfaces
        for s in self.samples:
            t = round(s.t - shift, 4)
            for (node, name), c in sorted(s.interfaces.items()):
                d = c - base.get((node, name), IfCounters())
                for m in metrics:
                    out.append((run, t, "iface", node, name, m, getattr(d, m)))
            for row in s.p4:
                node = str(row.get("switch", ""))
                item = f"job{row.get('job', '')}"
                for key, value in row.items():
                    if isinstance(value, int) and key != "job":
                        out.append((run, t, "p4", node, item, key, value))
        return out


class Sampler:
    """Samples interfaces every `interval` s and `p4()` every `p4_interval` s in a thread.
    `p4` may fail (a switch restarting): the error is recorded, sampling goes on."""

    def __init__(self, interfaces: Sequence[Interface], interval: float = 0.1,
                 p4: Callable[[], Iterable[dict[str, object]]] | None = None,
                 p4_interval: float = 0.5, clock: Callable[[], float] = time.monotonic) -> None:
        if interval <= 0 or p4_interval <= 0:
            raise ValueError("sampling intervals must be positive")
        self.telemetry = Telemetry(tuple(interfaces))
        self.interval = interval
        self.p4 = p4
        self.p4_interval = p4_interval
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self) -> "Sampler":
        self._t0 = self.clock()
        self.telemetry.wall0 = time.time()
        self._sample(with_p4=self.p4 is not None)
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Telemetry:
        """Stop, take a last sample, and return what was recorded; idempotent."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._sample(with_p4=self.p4 is not None)
        return self.telemetry

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        next_p4 = self._t0 + self.p4_interval
        while not self._stop.wait(self.interval):
            now = self.clock()
            due = self.p4 is not None and now >= next_p4
            if due:
                next_p4 = now + self.p4_interval
            self._sample(with_p4=due)

    def _sample(self, with_p4: bool) -> None:
        t = self.clock() - self._t0
        got: dict[tuple[str, str], IfCounters] = {}
        by_file: dict[str, list[Interface]] = {}
        for i in self.telemetry.interfaces:
            by_file.setdefault(i.net_dev, []).append(i)
        for path, items in by_file.items():
            try:
                counters = read_net_dev(path)
            except OSError as exc:
                self._error(f"{path}: {exc.strerror or exc}")
                continue
            for i in items:
                if i.name in counters:
                    got[(i.node, i.name)] = counters[i.name]
        p4: tuple[dict[str, object], ...] = ()
        if with_p4 and self.p4 is not None:
            try:
                p4 = tuple(self.p4())
            except Exception as exc:  # noqa: BLE001 - telemetry must never fail the job
                self._error(f"P4 counters: {type(exc).__name__}: {exc}")
        self.telemetry.samples.append(Sample(t, got, p4))

    def _error(self, text: str) -> None:
        # Keep the first few: a namespace that went away fails every sample the same way.
        if len(self.telemetry.errors) < 20:
            self.telemetry.errors.append(text)
