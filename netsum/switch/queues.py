"""Per-port egress queues between ingress and egress, as simple_switch's egress buffers.

simple_switch (`QueueingLogicRL`) keeps one FIFO per egress port, 64 packets deep by default,
drained at an optional rate in packets per second (`set_queue_depth` / `set_queue_rate`, per
port or for all ports).  A packet that finds its queue full is dropped.  At enqueue the packet
gets `enq_timestamp` (µs) and `enq_qdepth` (packets already queued); egress runs when the packet
leaves the queue, with `deq_timedelta` (µs it waited) and `deq_qdepth` (packets left behind).
The rate limiter gives each packet a departure time `max(now, previous departure + 1/rate)`.

Cost rule: a port without a rate is never queued here: its packets go from ingress straight to
egress (an unlimited queue drains at once, so depth stays 0), and a switch with no rate set
anywhere pays one `is None` check per packet.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["QueueConfig", "EgressQueues", "DEFAULT_DEPTH", "MAX_RATE", "MAX_DEPTH"]

DEFAULT_DEPTH = 64            # simple_switch's default egress buffer capacity, packets
MAX_DEPTH = 1 << 20
MAX_RATE = 10 ** 9            # pps; a rate of 0 means "not limited" (bmv2's default)


@dataclass(slots=True)
class QueueConfig:
    """Queue depth and rate per port; `None` keys are the all-ports values."""
    depth: dict[int | None, int] = field(default_factory=lambda: {None: DEFAULT_DEPTH})
    rate: dict[int | None, int] = field(default_factory=dict)

    def depth_of(self, port: int) -> int:
        return self.depth.get(port, self.depth[None])

    def rate_of(self, port: int) -> int:
        return self.rate.get(port, self.rate.get(None, 0))

    def set_depth(self, packets: int, port: int | None = None) -> None:
        if not 0 < packets <= MAX_DEPTH:
            raise ValueError(f"queue depth {packets} outside 1..{MAX_DEPTH} packets")
        if port is None:
            self.depth = {None: packets}      # all ports, as bmv2's set_capacity_for_all
        else:
            self.depth[port] = packets

    def set_rate(self, pps: int, port: int | None = None) -> None:
        if not 0 <= pps <= MAX_RATE:
            raise ValueError(f"queue rate {pps} outside 0..{MAX_RATE} packets/s "
                             "(0 = not limited)")
        if port is None:
            self.rate = {None: pps} if pps else {}
        elif pps or None in self.rate:
            self.rate[port] = pps             # 0 under an all-ports rate: this port unlimited
        else:
            self.rate.pop(port, None)

    @property
    def any_rate(self) -> bool:
        return any(self.rate.values())


class _Queue:
    __slots__ = ("items", "last_departure")

    def __init__(self) -> None:
        self.items: deque[tuple[int, int, Any]] = deque()   # (departure µs, enqueue µs, item)
        self.last_departure = -1


class EgressQueues:
    """The queues of one device.  Times are integer microseconds on the caller's clock."""

    def __init__(self, config: QueueConfig) -> None:
        self.config = config
        self._queues: dict[int, _Queue] = {}
        self.drops = 0

    def limited(self, port: int) -> bool:
        return self.config.rate_of(port) > 0

    def push(self, port: int, now: int, item: Any) -> int | None:
        """Queue `item` for `port`; the queue depth it found (enq_qdepth), or None when the
        queue is full (the packet is dropped)."""
        q = self._queues.get(port)
        if q is None:
            q = self._queues[port] = _Queue()
        depth = len(q.items)
        if depth >= self.config.depth_of(port):
            self.drops += 1
            return None
        gap = 1_000_000 // self.config.rate_of(port)
        departure = max(now, q.last_departure + gap) if q.last_departure >= 0 else now
        q.last_departure = departure
        q.items.append((departure, now, item))
        return depth

    def pop_due(self, now: int) -> list[tuple[int, int, int, Any]]:
        """Every (port, enqueue µs, depth left behind, item) whose departure time has come, in
        departure order."""
        due: list[tuple[int, int, int, int, Any]] = []
        for port, q in self._queues.items():
            items = q.items
            while items and items[0][0] <= now:
                dep, enq, item = items.popleft()
                due.append((dep, port, enq, len(items), item))
        due.sort(key=lambda d: d[0])
        return [(port, enq, left, item) for _dep, port, enq, left, item in due]

    def next_departure(self) -> int | None:
        """The earliest departure time (µs) of a queued packet, or None when all are empty."""
        times = [q.items[0][0] for q in self._queues.values() if q.items]
        return min(times) if times else None

    def depth(self, port: int) -> int:
        q = self._queues.get(port)
        return len(q.items) if q is not None else 0

    def clear(self) -> None:
        self._queues.clear()
