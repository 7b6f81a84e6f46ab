"""The compiled worker core (workers/native.py, wcore.c) against the Python reference.

Every worker of a simulated job (tests/oracle.py: a correct switch, links that lose,
duplicate and reorder) is a `Twin`: a Python `WorkerCore` and a `NativeCore` built from the
same arguments, given the same frames at the same virtual times; every call must send the
same frames byte for byte (launches, quantized values, retransmissions with their flag, in
the same order), report the same next deadline and state, and raise the same error; at the
end the results, statistics and next rounds must be equal, bit for bit.  `BatchTwin` does the
same through the frames API with a random link-layer prefix and results handed over in
batches of random size (the hot path of `allreduce`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest
from oracle import LossyLink, Network, OracleSwitch

from netsum.wire import HEADER_BYTES, Flags, MsgType
from netsum.workers import wire
from netsum.workers.blocks import even_shards, plan_blocks
from netsum.workers.core import CoreState, JobConfig, Step, Timing, WorkerCore
from netsum.workers.errors import WorkerError
from netsum.workers.native import NativeCore, native_status

pytestmark = pytest.mark.skipif(not native_status()[0],
                                reason=f"no compiled worker core: {native_status()[1]}")

FAST = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.05, progress_deadline=5.0)


class Twin:
    """Both cores, driven alike through the Step API; the reference's answers returned."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.py = WorkerCore(*args, **kwargs)  # type: ignore[arg-type]
        self.nat = NativeCore(*args, **kwargs)  # type: ignore[arg-type]
        self.calls = 0

    @property
    def state(self) -> CoreState:
        assert self.py.state is self.nat.state
        return self.py.state

    def next_deadline(self) -> float | None:
        d = self.py.next_deadline()
        assert self.nat.next_deadline() == d
        return d

    def _both(self, name: str, *args: object) -> Step:
        self.calls += 1
        try:
            a = getattr(self.py, name)(*args)
        except WorkerError as exc:
            with pytest.raises(type(exc)) as info:
                getattr(self.nat, name)(*args)
            assert str(info.value) == str(exc)
            raise
        b = getattr(self.nat, name)(*args)
        assert list(b.send) == list(a.send), f"call {self.calls} ({name}) sent other frames"
        return a

    def start(self, now: float) -> Step:
        return self._both("start", now)

    def receive(self, payload: bytes, now: float) -> Step:
        return self._both("receive", payload, now)

    def tick(self, now: float) -> Step:
        return self._both("tick", now)

    def compare_results(self) -> None:
        a, b = self.py.result(), self.nat.result()
        assert a.tensor.tobytes() == b.tensor.tobytes()
        assert np.array_equal(a.exponents, b.exponents)
        assert np.array_equal(a.maxima, b.maxima)
        assert np.array_equal(a.flags, b.flags)
        assert a.next_rounds == b.next_rounds
        sa, sb = a.stats, b.stats
        for f in ("packets_sent", "retransmissions", "bootstrap_packets", "results",
                  "duplicates", "stale", "rejected", "chunks", "fast_retransmissions",
                  "spurious", "misses", "elapsed"):
            assert getattr(sa, f) == getattr(sb, f), f
        assert np.array_equal(sa.latencies, sb.latencies)


class BatchTwin(Twin):
    """Through the frames API: results held back and handed to both cores in batches of
    random size (timers flush what is held first), frames with a link-layer prefix."""

    def __init__(self, rng: np.random.Generator, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.rng = rng
        self.held: list[bytes] = []
        self.hr = len(self.py.frames[0]) - self.py.packet_bytes
        # as allreduce's loop does: the lists taken once, the cores' frames read through them
        self.py_frames, self.nat_frames = self.py.frames, self.nat.frames

    def _frames(self, name: str, *args: object) -> Step:
        self.calls += 1
        try:
            sa = getattr(self.py, name)(*args)
            a = [bytes(self.py_frames[i]) for i in sa]
        except WorkerError as exc:
            with pytest.raises(type(exc)) as info:
                getattr(self.nat, name)(*args)
            assert str(info.value) == str(exc)
            raise
        sb = getattr(self.nat, name)(*args)
        b = [bytes(self.nat_frames[i]) for i in sb]
        assert b == a, f"call {self.calls} ({name}) sent other frames"
        return Step(tuple(f[self.hr:] for f in a), ())

    def _flush(self, now: float) -> Step:
        held, self.held = self.held, []
        if not held:
            return Step((), ())
        whole = [memoryview(bytearray(p)) for p in held if len(p) == self.py.packet_bytes]
        other = [p for p in held if len(p) != self.py.packet_bytes]
        out = self._frames("receive_frames", whole, len(whole), now) if whole else Step((), ())
        sent = list(out.send)
        for p in other:
            sent += self._both("receive", p, now).send
        return Step(tuple(sent), ())

    def start(self, now: float) -> Step:
        return self._frames("start_frames", now)

    def receive(self, payload: bytes, now: float) -> Step:
        self.held.append(payload)
        if self.rng.random() < 0.4 or len(self.held) >= 40:
            return self._flush(now)
        return Step((), ())

    def tick(self, now: float) -> Step:
        first = self._flush(now)
        if self.state is not CoreState.RUNNING:
            return first
        return Step(first.send + self._frames("tick_frames", now).send, ())


def net(seed: int, n: int, slots: int, k: int, loss: float, dup: float, reorder: float,
        job_id: int = 5) -> Network:
    rng = np.random.default_rng(seed)
    switch = OracleSwitch(k=k, members={job_id: list(range(n))}, num_slots={job_id: slots})
    return Network(switch, LossyLink(rng, loss=loss, dup=dup, reorder=reorder),
                   LossyLink(rng, loss=loss, dup=dup, reorder=reorder))


def tensors(seed: int, n: int, length: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + 77)
    out = []
    for _ in range(n):
        x = rng.standard_normal(length) * 10.0 ** rng.uniform(-30, 30)
        x[rng.random(length) < 0.1] = 0.0
        x[: length // 7] *= 2.0 ** -100           # blocks whose factor is beyond float32
        out.append(x.astype(np.float32))
    return out


CASES = [
    # n, slots, length, k, loss, dup, reorder, adaptive, hold_timers
    (2, 4, 1000, 32, 0.0, 0.0, 0.0, True, True),
    (3, 8, 1001, 64, 0.05, 0.05, 0.1, True, True),
    (4, 16, 5000, 32, 0.10, 0.05, 0.10, True, True),
    (8, 32, 3000, 32, 0.10, 0.10, 0.20, True, True),
    (5, 64, 40, 32, 0.10, 0.05, 0.10, True, True),       # fewer blocks than slots
    (2, 1, 500, 32, 0.20, 0.10, 0.30, True, True),       # one slot: stop-and-wait
    (4, 16, 4000, 32, 0.10, 0.05, 0.10, False, True),    # the whole window, no cwnd
    (4, 16, 5000, 32, 0.10, 0.05, 0.10, True, False),    # every timer on its own
    (4, 16, 4000, 32, 0.10, 0.05, 0.10, False, False),
]


@pytest.mark.parametrize("batched", [False, True], ids=["steps", "batches"])
@pytest.mark.parametrize("n, slots, length, k, loss, dup, reorder, adaptive, hold", CASES)
def test_native_core_sends_what_the_reference_sends(batched: bool, n: int, slots: int,
                                                    length: int, k: int, loss: float,
                                                    dup: float, reorder: float,
                                                    adaptive: bool, hold: bool) -> None:
    seed = n * 1000 + slots + length + hold
    network = net(seed, n, slots, k, loss, dup, reorder)
    xs = tensors(seed, n, length)
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=k)
    timing = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.05, progress_deadline=5.0,
                    adaptive=adaptive, hold_timers=hold)
    rng = np.random.default_rng(seed)
    rounds: list[Sequence[int] | None] = [None] * n
    for call in range(2):       # a second call continues the rounds of the first
        prefix = rng.integers(0, 256, 42, dtype=np.uint8).tobytes()
        twins = {r: (BatchTwin(rng, xs[r] * (call + 1), job, timing, rounds[r], prefix)
                     if batched else Twin(xs[r] * (call + 1), job, timing, rounds[r]))
                 for r in range(n)}
        network.run(twins)      # type: ignore[arg-type]
        for r, t in twins.items():
            t.compare_results()
            rounds[r] = t.py.result().next_rounds
    if loss:
        assert sum(t.py.stats().retransmissions for t in twins.values()), "no loss exercised"


@pytest.mark.parametrize("batched", [False, True], ids=["steps", "batches"])
def test_native_reduce_scatter_and_nonfinite_flags(batched: bool) -> None:
    n, k, length = 3, 32, 2000
    network = net(9, n, 8, k, 0.1, 0.05, 0.1)
    xs = tensors(9, n, length)
    shards = even_shards(length, n)
    plan = plan_blocks(length, k, shards)
    rng = np.random.default_rng(9)
    job = JobConfig(job_id=5, num_workers=n, num_slots=8, k=k)
    twins = {}
    for r in range(n):
        flags = rng.random(plan.num_blocks) < 0.2
        args = (xs[r], job, FAST, None, b"\x01" * 14)
        kw = {"rank": r, "shards": shards, "nonfinite": flags}
        twins[r] = BatchTwin(rng, *args, **kw) if batched else Twin(*args, **kw)
    network.run(twins)      # type: ignore[arg-type]
    for t in twins.values():
        t.compare_results()
        assert t.py.result().flags.any()


def test_native_errors_are_the_references() -> None:
    """A bootstrap result that is not zero, a STATUS, garbage and a REJECT: handed to both."""
    job = JobConfig(job_id=5, num_workers=2, num_slots=2, k=32)
    t = Twin(np.ones(100, np.float32), job, FAST)
    sent = t.start(0.0).send
    h = wire.decode_header(sent[0], 32)
    garbage = [b"", b"\x02" * 7, bytes(HEADER_BYTES + 4 * 32)]
    for g in garbage:
        assert not t.receive(g, 0.001).send
    status = wire.encode(wire.Header(msg_type=MsgType.STATUS, flags=Flags.NONE, job_id=5,
                                     slot=0, exp=0, count=1, round=h.round, offset=h.offset,
                                     workers=2), np.ones(32, np.int32), 32)
    t.receive(status, 0.002)
    assert t.py.status_frames == t.nat.status_frames == 1
    bad = wire.encode(wire.Header(msg_type=MsgType.RESULT, job_id=5, slot=h.slot,
                                  round=h.round, offset=h.offset, exp=h.exp, count=2,
                                  workers=2, flags=Flags.NONE), np.ones(32, np.int32), 32)
    with pytest.raises(WorkerError, match="bootstrap result"):
        t.receive(bad, 0.003)
    assert t.py.stats().rejected == t.nat.stats().rejected == len(garbage)


def _result_for(data: bytes, k: int) -> bytes:
    """A one-worker job's switch: the sum is the contribution itself."""
    pkt = wire.decode(data, k)
    h = pkt.header
    head = wire.Header(msg_type=MsgType.RESULT, flags=Flags.NONE, job_id=h.job_id, round=h.round,
                       slot=h.slot, exp=h.exp, count=1, offset=h.offset)
    return wire.encode(head, pkt.values, k)


def test_a_spurious_retransmission_is_counted_alike() -> None:
    """Slot 0 answers in 1 ms; slot 1's bootstrap waits past its 4 ms timer, is sent again,
    and is answered 0.5 ms later: sooner than any round trip, so the switch had the first
    copy (Stats.spurious); slot 0's use after a timeout answered 1.3 ms after its resend is
    not.  Both cores, frame for frame."""
    k = 32
    timing = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.1, progress_deadline=2.0,
                    adaptive=False, fast_retransmit=0, hold_timers=False)
    t = Twin(np.ones(4 * k, np.float32), JobConfig(5, 1, 2, k), timing)
    boot = t.start(0.0).send
    block0 = t.receive(_result_for(boot[0], k), 0.001).send     # slot 0: block 0
    assert len(block0) == 1
    block2 = t.receive(_result_for(block0[0], k), 0.0015).send  # slot 0: block 2
    retx = t.tick(0.004).send
    assert [wire.decode_header(p, k).slot for p in retx] == [1]
    assert len(t.receive(_result_for(boot[1], k), 0.0045).send) == 1   # slot 1 -> block 1
    assert t.py.stats().spurious == t.nat.stats().spurious == 1
    assert [wire.decode_header(p, k).slot for p in t.tick(0.0055).send] == [0]
    t.receive(_result_for(block2[0], k), 0.0068)
    assert t.py.stats().spurious == t.nat.stats().spurious == 1


def test_rtt_gains_are_divided_by_the_uses_in_flight() -> None:
    """RFC 7323 appendix G, in both cores: with 4 uses in flight, a sample moves SRTT by 1/32
    and RTTVAR by 1/16 of the difference, not 1/8 and 1/4.  Slot 0 answers at 10 ms (first
    sample: SRTT 10, RTTVAR 5, RTO 30 ms), slot 1 at 30 ms: RTTVAR 5 + 15/16 = 5.9375, SRTT
    10 + 20/32 = 10.625, RTO 34.375 ms, so slot 1's next use is sent again at 64.375 ms (with
    RFC 6298's gains: RTO 47.5, at 77.5 ms); slot 0's, launched at 10 ms, at 40 ms."""
    k = 32
    timing = Timing(rto_initial=0.5, rto_min=0.002, rto_max=1.0, progress_deadline=5.0,
                    adaptive=False, fast_retransmit=0, hold_timers=False)
    t = Twin(np.ones(16 * k, np.float32), JobConfig(6, 1, 4, k), timing)
    boot = t.start(0.0).send
    assert len(boot) == 4
    assert len(t.receive(_result_for(boot[0], k), 0.010).send) == 1
    assert len(t.receive(_result_for(boot[1], k), 0.030).send) == 1
    slots = [[wire.decode_header(p, k).slot for p in t.tick(at).send]
             for at in (0.041, 0.064, 0.0645)]
    assert slots == [[0], [], [1]]


def test_without_a_compiler_the_python_core_runs_and_says_why(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import netsum.workers.native as native
    monkeypatch.setattr(native, "_module", None)
    monkeypatch.setattr(native, "_why", "no C compiler (cc/gcc, or $CC) on PATH")
    monkeypatch.setattr(native, "_said", [])
    assert native.native_status() == (False, "no C compiler (cc/gcc, or $CC) on PATH")
    assert "runs in Python: no C compiler" in caplog.text
    with pytest.raises(RuntimeError, match="not here: no C compiler"):
        NativeCore(np.ones(4, np.float32), JobConfig(5, 1, 2, 32), FAST)
    monkeypatch.setenv(native.ENV, "1")
    with pytest.raises(RuntimeError, match="NETSUM_WORKER_NATIVE=1"):
        native.native_status()
    monkeypatch.setenv(native.ENV, "0")
    assert native.native_status() == (False, "NETSUM_WORKER_NATIVE=0")


# -- held timers (Timing.hold_timers, workers/recovery.py): both cores, by hand ------------

#: Held timers need fast retransmit on; 1000 results past a use never come in these few
#: packets, so no gap is found and the timers alone are seen.
HOLD = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.1, progress_deadline=2.0,
              adaptive=False, fast_retransmit=1000)


def _slots_of(sent: Sequence[bytes], k: int = 32) -> list[int]:
    return [wire.decode_header(p, k).slot for p in sent]


def _status_for(data: bytes, k: int = 32) -> bytes:
    """The switch's STATUS for a DATA it already holds (a one-worker job's bitmap: 1)."""
    h = wire.decode_header(data, k)
    head = wire.Header(msg_type=MsgType.STATUS, flags=Flags.NONE, job_id=h.job_id,
                       slot=h.slot, exp=h.exp, count=1, round=h.round, offset=h.offset,
                       workers=1)
    return wire.encode(head, np.ones(k, np.int32), k)


def _four_slots(hold: bool) -> tuple[Twin, list[bytes]]:
    """One worker, 4 slots, 16 blocks; bootstraps at 0 (timers at 4 ms, rto_initial); slot
    0's answered at 1 ms (the first RTT sample: SRTT 1, RTTVAR 0.5, RTO 3 ms) and its block
    0 at 2 ms (1 ms again, with 3 other uses in flight: RTTVAR 0.5 - 0.5/16 = 0.46875, RTO
    1 + 4 * 0.46875 = 2.875 ms).  Slot 0's next use is due at 4.875 ms, slots 1-3 at 4."""
    k = 32
    t = Twin(np.ones(16 * k, np.float32), JobConfig(5, 1, 4, k),
             dataclasses.replace(HOLD, hold_timers=hold))
    boot = list(t.start(0.0).send)
    (b0,) = t.receive(_result_for(boot[0], k), 0.001).send
    assert len(t.receive(_result_for(b0, k), 0.002).send) == 1
    return t, boot


def test_held_timers_wait_while_results_flow_then_probe_one_use() -> None:
    """Without the gate slots 1-3 fire at 4 ms, while a result came 2 ms before.  Held, the
    gate is an RTO after that result (2 + 2.875 ms): nothing at 4 ms, and at 4.875 ms, with
    all four due, only the longest due (slot 1: 4 ms, the lowest of three) goes, a probe."""
    t, _ = _four_slots(hold=False)
    assert t.next_deadline() == pytest.approx(0.004)
    assert _slots_of(t.tick(0.004).send) == [1, 2, 3]
    t, _ = _four_slots(hold=True)
    assert t.next_deadline() == pytest.approx(0.004875)
    assert t.tick(0.004).send == ()
    assert _slots_of(t.tick(0.004875).send) == [1]
    assert t.py.stats().retransmissions == t.nat.stats().retransmissions == 1
    assert t.next_deadline() == pytest.approx(0.004875 + 0.002875)   # the next probe


@pytest.mark.parametrize("status_for_second", [False, True])
def test_a_status_keeps_the_timers_held_and_an_unanswered_probe_frees_them(
        status_for_second: bool) -> None:
    """The probe of slot 1 (4.875 ms) is answered by a STATUS (the switch holds this copy):
    at the next probe time (7.75 ms) one more probe goes, slot 2 (due at 4 ms, below slot
    3).  If that one gets no answer at all by 10.625 ms, this worker's copy was missing: the
    due uses (slots 0 and 3) go together, as without the gate; if a STATUS came for it too,
    only the next probe (slot 3, the longest due)."""
    t, boot = _four_slots(hold=True)
    (probe1,) = t.tick(0.004875).send
    t.receive(_status_for(probe1), 0.005)
    assert t.py.status_frames == t.nat.status_frames == 1
    assert t.next_deadline() == pytest.approx(0.00775)
    (probe2,) = t.tick(0.00775).send
    assert _slots_of([probe2]) == [2]
    if status_for_second:
        t.receive(_status_for(probe2), 0.008)
    assert t.next_deadline() == pytest.approx(0.010625)
    sent = _slots_of(t.tick(0.010625).send)
    assert sent == ([3] if status_for_second else [0, 3])


@pytest.mark.parametrize("status_first", [False, True])
def test_a_probe_answered_by_itself_frees_the_due_timers(status_first: bool) -> None:
    """The probe of slot 1 (4.875 ms) answered at 6 ms, 1.125 ms after it (not sooner than
    the least RTT, 1 ms) and with no STATUS between: its first copy was lost, so may the
    others' be: the due uses (0, 2, 3) go at once.  With a STATUS before the answer the
    switch had the copy; the gate holds them an RTO after that result (8.875 ms)."""
    t, boot = _four_slots(hold=True)
    (probe,) = t.tick(0.004875).send
    if status_first:
        t.receive(_status_for(probe), 0.0055)
    assert len(t.receive(_result_for(probe, 32), 0.006).send) == 1    # slot 1's next use
    if status_first:
        assert t.next_deadline() == pytest.approx(0.008875)
        assert t.tick(0.006).send == ()
    else:
        assert t.next_deadline() == pytest.approx(0.004)
        assert _slots_of(t.tick(0.006).send) == [0, 2, 3]


class StalledUplink(LossyLink):
    """A link on which node `stalled`'s packets reach the switch no sooner than `until`: a
    peer descheduled for a while at 0 % loss."""

    def __init__(self, rng: np.random.Generator, stalled: int, since: float,
                 until: float) -> None:
        super().__init__(rng, fifo=True)
        self.stalled, self.since, self.until = stalled, since, until

    def arrivals(self, now: float, node: int) -> list[float]:
        times = LossyLink.arrivals(self, now, node)
        if node == self.stalled and self.since <= now < self.until:
            return [max(t, self.until) for t in times]
        return times


@pytest.mark.parametrize("hold", [True, False])
def test_a_stalled_peer_costs_a_probe_per_rto_not_every_use(hold: bool) -> None:
    """4 workers, 32 slots, 0 % loss; rank 3's packets sent from 1 ms to 31 ms reach the
    switch at 31 ms: the others' uses wait for it.  Held, each of them sends at most
    one probe per RTO of that silence (the RTO is rto_min, 2 ms, as the round trip here is
    0.2 ms): 30 / 2 + 1 timer retransmissions each.  Without the gate every waiting use
    fires, with backoff, many times that.  Both cores send the same frames; the sums are exact."""
    n, k, slots = 4, 32, 32
    rng = np.random.default_rng(11)
    switch = OracleSwitch(k=k, members={5: list(range(n))}, num_slots={5: slots})
    network = Network(switch, StalledUplink(rng, 3, 0.001, 0.031), LossyLink(rng))
    xs = tensors(11, n, 1000 * k)
    timing = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.05, progress_deadline=5.0,
                    hold_timers=hold)
    twins = {r: Twin(xs[r], JobConfig(5, n, slots, k), timing) for r in range(n)}
    network.run(twins)      # type: ignore[arg-type]
    for t in twins.values():
        t.compare_results()
    assert max(t.py.stats().elapsed for t in twins.values()) > 0.031    # it did wait
    # by timer (the stall's end brings its results in one burst, in rank 3's order: fast
    # retransmit resends some, with or without the gate)
    retx = [twins[r].py.stats().retransmissions - twins[r].py.stats().fast_retransmissions
            for r in range(3)]
    if hold:
        assert max(retx) <= 30 / 2 + 1, retx
    else:
        assert min(retx) > 3 * (30 / 2 + 1), retx
