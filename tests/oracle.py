"""Test oracle: an in-process Python model of p4/netsum.p4's aggregation algorithm (single-switch
root role), a fake lossy link, and a discrete-event loop that wires N worker cores through them
on a virtual clock.

This is a TEST ORACLE ONLY.  It exists so the worker core's unit tests can run thousands of
rounds with loss in milliseconds.  No demo, experiment or end-to-end test may use it in place of
the P4 switch.

Model (per job, slot and set = round & 1, as netsum.p4's registers): the round held, bitmap of
workers seen, contribution count, max exponent, done flag, K int32 sums, and (protocol v2) the
NONFINITE OR and the length, offset, dest and qexp (`reason`: the exponent the values are
quantized with) the round's first contribution said.  A DATA
packet of an older round than its set holds is stale and dropped; a newer round (or the first
use of the set) starts the round with this packet; the same round with the worker's bit clear
adds (int32 wrap-around, max exponent, NONFINITE ORed), and the last contribution (count ==
num_workers) multicasts the RESULT to every member -- for a reduce-scatter (dest < 0xFF) the
values to the owner alone, an ACK (the header, flag ACK) to the others; with the bit already
set it is a duplicate: a done set answers the sender alone (values or ACK as it is owed),
otherwise with a STATUS.

Protocol v2 agreement, written from docs/protocol.md and not from the P4 program (this model is
what the program's behaviour is checked against): a member's DATA whose K (its size or
klog2), member count, dest or slot disagrees with the job, or whose length, offset, dest or
qexp disagrees with the round's first contribution, is answered with a REJECT to the sender alone
(the header: reason set, the field it names holding the switch's value) and changes nothing;
the job's last refusal (reason, member bit; per registration) rides on every STATUS in
`reason`/`length`; a RESULT carries the round's qexp in `reason`.  Members are ranks: member i
of `members[job]` has rank i.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from netsum.wire import (DEST_ALL, HEADER_BYTES, HEADER_FIELDS, REASON_FIELD, Flags, MsgType,
                         Reason, klog2)
from netsum.workers import wire
from netsum.workers.core import CoreState, Step, WorkerCore
from netsum.workers.errors import WorkerError

__all__ = ["Fabric", "OracleSwitch", "LossyLink", "Network", "SlotSet"]


class Fabric(Protocol):
    """What the network loop needs from a switch: a payload from a worker in, (worker,
    payload) pairs out.  `OracleSwitch` is one; a test may adapt the real P4 switch too."""

    def process(self, src: int, payload: bytes) -> list[tuple[int, bytes]]: ...


@dataclass(slots=True)
class SlotSet:
    epoch: int = 0
    round: int | None = None   # None: never used in this epoch
    bitmap: int = 0
    count: int = 0
    exp: int = 0
    done: bool = False
    offset: int = 0
    length: int = 0
    dest: int = DEST_ALL
    qexp: int = 0
    nonfinite: int = 0
    values: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))


@dataclass(slots=True)
class OracleSwitch:
    """Workers are addressed by small ints (their "source address"); `members[job]` lists
    them in bit order, as the controller's member table would."""
    k: int
    members: dict[int, Sequence[int]]
    num_slots: dict[int, int]
    state: dict[tuple[int, int, int], SlotSet] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)
    contributions: int = 0
    duplicates: int = 0
    stale: int = 0
    dropped: int = 0
    overflowed: int = 0
    #: REJECTs sent, by reason
    refused: dict[Reason, int] = field(default_factory=dict)
    #: per job: (reason, member bit, epoch) of its last refusal
    last_refusal: dict[int, tuple[int, int, int]] = field(default_factory=dict)

    def _set(self, job: int, slot: int, s: int) -> SlotSet:
        key = (job, slot, s)
        if key not in self.state:
            self.state[key] = SlotSet(values=np.zeros(self.k, dtype=np.int32))
        return self.state[key]

    def process(self, src: int, payload: bytes) -> list[tuple[int, bytes]]:
        h, values = self._parse(payload)
        if h is None:
            self.dropped += 1
            return []
        workers = self.members.get(h.job_id)
        if workers is None or src not in workers or h.msg_type is not MsgType.DATA:
            self.dropped += 1
            return []
        rank = list(workers).index(src)
        bit = 1 << rank
        n = len(workers)
        # the job's agreement, stateless (values None: a frame of another K)
        if values is None or h.klog2 != klog2(self.k):
            return self._refuse(src, h, bit, Reason.K, klog2(self.k))
        if h.workers != n:
            return self._refuse(src, h, bit, Reason.WORKERS, n)
        if h.dest != DEST_ALL and h.dest >= n:
            return self._refuse(src, h, bit, Reason.DEST, h.dest)
        if h.slot >= self.num_slots[h.job_id]:
            return self._refuse(src, h, bit, Reason.SLOT, self.num_slots[h.job_id])
        cur = self._set(h.job_id, h.slot, h.round & 1)
        epoch = self.epochs.get(h.job_id, 0)
        if cur.epoch != epoch:
            cur.epoch, cur.round = epoch, None
        age = None if cur.round is None else (h.round - cur.round) % (1 << 32)
        if (age is None and h.round > 1) or (age is not None and age >= 1 << 31):
            self.stale += 1
            return []
        if age == 0 and cur.bitmap & bit:
            self.duplicates += 1
            if cur.done:
                return [(src, self._result(h, cur, rank))]
            return [(src, self._status(h, cur))]
        if age == 0:
            # the round's agreement: what its first contribution said
            for name, reason in (("length", Reason.LENGTH), ("offset", Reason.OFFSET),
                                 ("dest", Reason.DEST)):
                if getattr(h, name) != getattr(cur, name):
                    return self._refuse(src, h, bit, reason, getattr(cur, name))
            if h.reason != cur.qexp:
                return self._refuse(src, h, bit, Reason.QEXP, cur.qexp)
        self.contributions += 1
        nf = int(h.flags & Flags.NONFINITE)
        if age != 0:
            cur.round, cur.bitmap = h.round, bit
            cur.count, cur.exp, cur.done, cur.offset = 1, h.exp, False, h.offset
            cur.length, cur.dest, cur.nonfinite = h.length, h.dest, nf
            cur.qexp = h.reason
            cur.values = values.copy()
        else:
            cur.bitmap |= bit
            cur.count += 1
            cur.exp = max(cur.exp, h.exp)
            cur.nonfinite |= nf
            wide = cur.values.astype(np.int64) + values
            if (np.abs(wide) > np.iinfo(np.int32).max).any():
                self.overflowed += 1
            cur.values = wide.astype(np.int32)  # wraps like bit<32> addition
        if cur.count != n:
            return []
        cur.done = True
        return [(w, self._result(h, cur, r)) for r, w in enumerate(workers)]

    def _parse(self, payload: bytes) -> tuple[wire.Header | None, np.ndarray | None]:
        """The header and values of a packet of this K; the header alone (values None) of a
        packet whose values do not fit this K; (None, None) for anything else."""
        try:
            pkt = wire.decode(payload, self.k)
            return pkt.header, pkt.values
        except wire.WireError:
            pass
        if len(payload) < HEADER_BYTES or (len(payload) - HEADER_BYTES) % 4:
            return None, None
        try:
            raw = wire.unpack_fields(payload)
            fields: dict[str, object] = dict(raw, msg_type=MsgType(raw["msg_type"]),
                                             flags=Flags(raw["flags"]))
            return wire.Header(**fields), None  # type: ignore[arg-type]
        except (wire.WireError, ValueError, TypeError):
            return None, None

    def _refuse(self, src: int, h: wire.Header, bit: int, reason: Reason,
                value: int) -> list[tuple[int, bytes]]:
        self.refused[reason] = self.refused.get(reason, 0) + 1
        self.last_refusal[h.job_id] = (int(reason), bit, self.epochs.get(h.job_id, 0))
        fields = {f.name: getattr(h, f.name) for f in HEADER_FIELDS}
        fields.update(msg_type=MsgType.REJECT, flags=Flags.NONE, count=0, reason=int(reason))
        fields[REASON_FIELD[reason]] = value
        return [(src, wire.encode(wire.Header(**fields), None, self.k))]

    def new_epoch(self, job: int) -> None:
        """What the controller does when it registers `job` again: its sets hold nothing."""
        self.epochs[job] = self.epochs.get(job, 0) + 1

    def _status(self, h: wire.Header, s: SlotSet) -> bytes:
        """netsum.p4's reply_status: count and exp so far, the bitmap in every value (value[0]
        is the one to read), the job's last refusal of this registration in reason/length."""
        reason, bit, epoch = self.last_refusal.get(h.job_id, (0, 0, -1))
        if epoch != self.epochs.get(h.job_id, 0):
            reason, bit = 0, 0
        head = wire.Header(msg_type=MsgType.STATUS, flags=Flags.NONE, job_id=h.job_id,
                           slot=h.slot, exp=s.exp, count=s.count, round=h.round,
                           offset=h.offset, workers=h.workers, dest=h.dest, reason=reason,
                           klog2=h.klog2, length=bit)
        out = np.full(self.k, np.array([s.bitmap], dtype=np.uint32).view(np.int32)[0])
        return wire.encode(head, out, self.k)

    def _result(self, h: wire.Header, s: SlotSet, rank: int) -> bytes:
        """The round's RESULT as member `rank` gets it: the values, or (a reduce-scatter
        chunk it does not own) the header alone with ACK."""
        ack = s.dest != DEST_ALL and s.dest != rank
        head = wire.Header(msg_type=MsgType.RESULT,
                           flags=Flags(s.nonfinite) | (Flags.ACK if ack else Flags.NONE),
                           job_id=h.job_id, slot=h.slot, exp=s.exp, count=s.count,
                           round=h.round, offset=h.offset, workers=h.workers, dest=s.dest,
                           reason=s.qexp, klog2=h.klog2, length=s.length)
        return wire.encode(head, None if ack else s.values, self.k)


@dataclass(slots=True)
class LossyLink:
    """Each packet is lost with probability `loss`, else delivered after `delay` (+ up to
    `jitter`), once more with probability `dup`, and with probability `reorder` held back by up
    to `reorder_delay` so later packets overtake it.

    `fifo` keeps each node's own packets in order (other nodes' packets still overtake them),
    as a direct link or one socket does; without it a node's packets reorder freely."""
    rng: np.random.Generator
    loss: float = 0.0
    dup: float = 0.0
    reorder: float = 0.0
    delay: float = 100e-6
    jitter: float = 20e-6
    reorder_delay: float = 2e-3
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    fifo: bool = False
    last: dict[int, float] = field(default_factory=dict)

    def arrivals(self, now: float, node: int) -> list[float]:
        if self.rng.random() < self.loss:
            self.lost += 1
            return []
        copies = 2 if self.rng.random() < self.dup else 1
        self.duplicated += copies - 1
        times = []
        for _ in range(copies):
            t = now + self.delay + self.jitter * self.rng.random()
            if self.rng.random() < self.reorder:
                self.reordered += 1
                t += self.reorder_delay * self.rng.random()
            if self.fifo:
                t = max(t, self.last.get(node, 0.0) + 1e-9)
                self.last[node] = t
            times.append(t)
        return times


@dataclass(slots=True)
class Network:
    """Discrete-event loop on a virtual clock: worker cores <-> link <-> switch <-> link.
    With `switch_rate` (packets/s) the switch serves one packet at a time from a drop-tail
    queue of `queue_limit` packets, like a software switch reading a socket buffer."""
    switch: Fabric
    uplink: LossyLink
    downlink: LossyLink
    switch_rate: float | None = None
    queue_limit: int = 1000
    busy_until: float = 0.0
    queue_drops: int = 0
    queue: list[tuple[float, int, bool, int, bytes]] = field(default_factory=list)
    seq: int = 0
    now: float = 0.0
    tamper: Callable[[int, bytes], bytes] | None = None
    #: with run(keep_going=True): per worker, the error its core raised (the others go on)
    failures: dict[int, BaseException] = field(default_factory=dict)
    keep_going: bool = False

    def _push(self, to_switch: bool, node: int, payload: bytes, at: float | None = None) -> None:
        link = self.uplink if to_switch else self.downlink
        for t in link.arrivals(self.now if at is None else at, node):
            self.seq += 1
            heapq.heappush(self.queue, (t, self.seq, to_switch, node, payload))

    def _emit(self, worker: int, step: Step) -> None:
        for payload in step.send:
            self._push(True, worker, payload)

    def _call(self, worker: int, fn: Callable[[], Step]) -> None:
        try:
            self._emit(worker, fn())
        except WorkerError as exc:
            if not self.keep_going:
                raise
            self.failures[worker] = exc

    def run(self, cores: dict[int, WorkerCore], max_time: float = 3600.0,
            keep_going: bool = False) -> None:
        """Run until every core is DONE.  An error from a core propagates, unless
        `keep_going`: then it is kept in `failures` and the other cores go on until each is
        done or failed (a misconfigured member must not stop the test from seeing what the
        others end with)."""
        self.keep_going = keep_going
        for w, core in cores.items():
            self._call(w, lambda core=core: core.start(self.now))   # type: ignore[misc]

        def live() -> dict[int, WorkerCore]:
            return {w: c for w, c in cores.items()
                    if c.state is CoreState.RUNNING and w not in self.failures}
        steps = 0
        while live():
            steps += 1
            if steps > 2_000_000:
                raise AssertionError("simulation made no progress in 2,000,000 steps")
            deadlines = [(d, w) for w, c in live().items()
                         if (d := c.next_deadline()) is not None]
            t_timer, w_timer = min(deadlines) if deadlines else (float("inf"), -1)
            if self.queue and self.queue[0][0] <= t_timer:
                t, _, to_switch, node, payload = heapq.heappop(self.queue)
                self.now = max(self.now, t)
                if to_switch:
                    depart = self.now
                    if self.switch_rate:
                        begin = max(self.now, self.busy_until)
                        if (begin - self.now) * self.switch_rate >= self.queue_limit:
                            self.queue_drops += 1
                            continue
                        self.busy_until = depart = begin + 1.0 / self.switch_rate
                    for dst, out in self.switch.process(node, payload):
                        self._push(False, dst, out, depart)
                elif node in cores and cores[node].state is not CoreState.IDLE and \
                        node not in self.failures:
                    if self.tamper is not None:
                        payload = self.tamper(node, payload)
                    core = cores[node]
                    self._call(node, lambda: core.receive(payload, self.now))
            else:
                self.now = max(self.now, t_timer)
                core = cores[w_timer]
                self._call(w_timer, lambda: core.tick(self.now))
            if self.now > max_time:
                raise AssertionError(f"simulation passed {max_time}s of virtual time")
