"""The lane engine (netsum.training.lanes) against the test oracle of the switch, with real
threads: two engines play two ranks, each with its own in-process transport.

Expectations come from the inputs: float64 sums, and the quantization bound of
docs/quantization.md computed here from the inputs' block maxima (never from the engine's
answer).  The real switch is exercised by tests/e2e/test_training.py.

Two transports: the oracle's bytes in and out (the Step API of the Python core), and
`FrameLink`, the same oracle behind the frames API of a frame transport, on which the lanes
run the compiled core (workers/native.py) with packets moved in place, as netsum-worker does.
"""
from __future__ import annotations

import math
import queue
import threading
from collections.abc import Iterable

import numpy as np
import pytest

from netsum.training.lanes import LaneEngine, LaneError, LaneSpec, job_id_of
from oracle import OracleSwitch
from exactsums import reference_results, speculated
from netsum.workers import JobConfig, Timing, quant, wire
from netsum.workers.native import native_module
from netsum.wire import Flags, MsgType

K = 32


class OracleLink:
    """The oracle switch shared by the ranks; each rank's transport delivers its outputs."""

    def __init__(self, jobs: Iterable[int], ranks: int, slots: int) -> None:
        ids = list(jobs)
        self.switch = OracleSwitch(K, {j: list(range(ranks)) for j in ids},
                                   {j: slots for j in ids})
        self.inboxes = [queue.SimpleQueue[bytes]() for _ in range(ranks)]
        self.lock = threading.Lock()
        self.silent: set[int] = set()      # ranks whose packets the switch never sees

    def transport(self, rank: int, frames: bool = False) -> "_Transport":
        return FrameLink(self, rank) if frames else _Transport(self, rank)


class _Transport:
    def __init__(self, link: OracleLink, rank: int) -> None:
        self.link, self.rank, self.closed = link, rank, False

    def send(self, payloads: Iterable[bytes]) -> None:
        for p in payloads:
            if self.rank in self.link.silent:
                continue
            with self.link.lock:
                out = self.link.switch.process(self.rank, p)
            for dst, res in out:
                self.link.inboxes[dst].put(res)

    def receive(self, timeout: float) -> list[bytes]:
        box = self.link.inboxes[self.rank]
        try:
            out = [box.get(timeout=timeout) if timeout > 0 else box.get_nowait()]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(box.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        self.closed = True


class FrameLink(_Transport):
    """The oracle link behind a frame transport's hot path (workers.transport.BatchTransport):
    the cores' frames are sent from their rows (no link-layer prefix here), results are copied
    into receive rows and handed over as views; what is not a whole packet goes to rx_other.
    Counts how payloads went out, so a test can tell the frames path was taken."""

    frame_prefix = b""

    def __init__(self, link: OracleLink, rank: int) -> None:
        super().__init__(link, rank)
        self.rx_payloads: list[memoryview] = []
        self.rx_other: list[bytes] = []
        self.sent_frames = self.sent_bytes = 0
        self._buf = bytearray()

    def send(self, payloads: Iterable[bytes]) -> None:
        payloads = list(payloads)
        self.sent_bytes += len(payloads)
        super().send(payloads)

    def send_frames(self, frames: list[memoryview], slots: list[int]) -> None:
        self.sent_frames += len(slots)
        super().send([bytes(frames[i]) for i in slots])

    def receive_into(self, timeout: float, size: int) -> int:
        got = self.receive(timeout)
        whole = [p for p in got if len(p) == size]
        self.rx_other += [p for p in got if len(p) != size]
        if len(self.rx_payloads) < len(whole) or (whole and len(self.rx_payloads[0]) != size):
            rows = max(256, len(whole))
            self._buf = bytearray(rows * size)
            mv = memoryview(self._buf)
            self.rx_payloads = [mv[j * size:(j + 1) * size] for j in range(rows)]
        for row, p in zip(self.rx_payloads, whole):
            row[:] = p
        return len(whole)


#: the transports the engine is tested over (the frames path only where the C core builds)
TRANSPORTS = ["bytes", pytest.param("frames", marks=pytest.mark.skipif(
    native_module() is None, reason="the compiled worker core does not build here"))]


def engines(lanes: int = 3, ranks: int = 2, slots: int = 8, deadline: float = 5.0,
            delay: float = 0.0, transport: str = "bytes"
            ) -> tuple[OracleLink, list[LaneEngine]]:
    """`transport`: "bytes" (the Step API) or "frames" (FrameLink: the compiled core)."""
    ids = list(range(10, 10 + lanes))
    link = OracleLink(ids, ranks, slots)
    specs = [LaneSpec(JobConfig(j, ranks, slots, K)) for j in ids]
    timing = Timing(progress_deadline=deadline)
    out = [LaneEngine(link.transport(r, transport == "frames"), specs, timing, delay)
           for r in range(ranks)]
    for e in out:
        assert e.native is (transport == "frames"), "the lanes took the other path"
    return link, out


def bound_from_inputs(xs: list[np.ndarray]) -> np.ndarray:
    """docs/quantization.md: per block, E = max over workers of the least e with 2^e >= max|x|
    (clamped to [-126, 128]); s = the largest s with n 2^s <= 2^31 - 1; per element the sum is
    off by at most n 2^(E-s-1), plus half an ulp of float32 (2^-24 |y|)."""
    n = len(xs)
    s = max(t for t in range(64) if n * 2 ** t <= 2 ** 31 - 1)
    length = len(xs[0])
    out = np.zeros(length)
    for b in range(0, length, K):
        peak = max(float(np.max(np.abs(x[b:b + K]))) for x in xs)
        if peak == 0:
            continue
        e = min(max(math.ceil(math.log2(peak)), -126), 128)
        out[b:b + K] = n * 2.0 ** (e - s - 1)
    total = np.sum(np.stack(xs).astype(np.float64), axis=0)
    return out + 2.0 ** -24 * np.abs(total)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sums_of_many_tensors_over_several_lanes_match_the_inputs(transport: str) -> None:
    link, (a, b) = engines(lanes=3, transport=transport)
    rng = np.random.default_rng(7)
    sizes = [1, 31, 33, 200, 1000, 5, 640]
    inputs = [[(rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3)).astype(np.float32)
               for n in sizes] for _ in range(2)]
    try:
        fa = [a.submit(x, f"t{i}") for i, x in enumerate(inputs[0])]
        fb = [b.submit(x, f"t{i}") for i, x in enumerate(inputs[1])]
        for i, (f0, f1) in enumerate(zip(fa, fb)):
            r0, r1 = f0.result(timeout=20), f1.result(timeout=20)
            want = inputs[0][i].astype(np.float64) + inputs[1][i]
            bound = bound_from_inputs([inputs[0][i], inputs[1][i]])
            assert np.all(np.abs(r0.tensor - want) <= bound), f"tensor {i}"
            assert np.array_equal(r0.tensor, r1.tensor)     # every rank gets the same bits
            assert r0.lane == i % 3
        # The oracle sends each lane's packets only: every one reached its own lane's core
        # (one handed to another lane's core is counted there as not its own).
        for e in (a, b):
            assert sum(s.rejected for s in e.stats) == 0 and e.foreign == 0
    finally:
        a.close()
        b.close()
    if transport == "frames":      # every packet left from the cores' rows, none as bytes
        for t in (a._transport, b._transport):
            assert isinstance(t, FrameLink) and t.sent_frames > 0 and t.sent_bytes == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_bucket_s_next_step_is_predicted_from_its_last_one(transport: str) -> None:
    """Speculative exponents across steps (docs/quantization.md): the second step's tensors
    of each key are quantized with the first step's maxima + 1 where the new max is within
    two binades below that, else sent again with the new max; bit for bit the integer
    reference of those exponents, from the inputs alone, on every rank."""
    link, (a, b) = engines(lanes=2, transport=transport)
    rng = np.random.default_rng(11)
    sizes = [300, 1000, 300]          # keys 0 and 2: the same length, told apart by the key
    steps = []
    for _ in range(2):
        # each block's magnitude moves by up to 3 binades between the steps
        steps.append([[(rng.standard_normal(n) * np.repeat(
            2.0 ** rng.integers(-3, 1, -(-n // K)), K)[:n]).astype(np.float32)
            for n in sizes] for _ in range(2)])
    got = []
    try:
        for xs in steps:
            for e in (a, b):
                e.reset_order()
            fa = [a.submit(x, key=i) for i, x in enumerate(xs[0])]
            fb = [b.submit(x, key=i) for i, x in enumerate(xs[1])]
            got.append([(f0.result(timeout=20), f1.result(timeout=20))
                        for f0, f1 in zip(fa, fb)])
    finally:
        a.close()
        b.close()
    predicted = misses = 0
    for i in range(len(sizes)):
        first = [steps[0][r][i] for r in range(2)]
        second = [steps[1][r][i] for r in range(2)]
        r0, r1 = got[1][i]
        np.testing.assert_array_equal(got[0][i][0].tensor, reference_results(first, K))
        m1 = np.max([quant.block_exponents(x, K) for x in first], axis=0)
        m2 = np.max([quant.block_exponents(x, K) for x in second], axis=0)
        predict = np.minimum(m1.astype(int) + 1, 255)
        np.testing.assert_array_equal(r0.tensor, reference_results(second, K, predict, 2))
        assert np.array_equal(r0.tensor, r1.tensor)
        used = speculated(m2, predict, 2)
        predicted += len(m2)
        misses += int(((used != predict) & (m2 != 0)).sum())
    assert 0 < misses < predicted
    for e in (a, b):
        assert e.totals["predicted"] == predicted and e.totals["misses"] == misses
        # only the first step paid bootstrap uses
        assert e.totals["bootstrap"] == sum(min(8, -(-n // K)) for n in sizes)


def test_lanes_run_at_the_same_time() -> None:
    """With a link latency, tensors dealt to different lanes are on the wire together: each
    one starts before the previous lane's tensor has finished (a serial engine could not)."""
    link, (a, b) = engines(lanes=4, delay=0.05)
    xs = [np.full(64, float(i + 1), np.float32) for i in range(4)]
    try:
        fa = [a.submit(x) for x in xs]
        fb = [b.submit(x) for x in xs]
        res = [f.result(timeout=20) for f in fa]
        [f.result(timeout=20) for f in fb]
    finally:
        a.close()
        b.close()
    for prev, nxt in zip(res, res[1:]):
        assert nxt.started < prev.finished
    assert [r.tensor[0] for r in res] == [2.0, 4.0, 6.0, 8.0]


def test_reset_order_deals_from_lane_zero_again() -> None:
    link, (a, b) = engines(lanes=3)
    try:
        for e in (a, b):
            e.submit(np.ones(4, np.float32))
            e.reset_order()
        fa, fb = (e.submit(np.ones(4, np.float32)) for e in (a, b))
        assert fa.result(timeout=20).lane == fb.result(timeout=20).lane == 0
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_silent_peer_fails_the_future_with_the_lane_and_later_ones_at_once(
        transport: str) -> None:
    link, (a, b) = engines(lanes=2, deadline=0.3, transport=transport)
    link.silent.add(1)
    try:
        f = a.submit(np.ones(100, np.float32), "bucket 0")
        with pytest.raises(LaneError, match=r"lane 0 \(job 10\), bucket 0: WorkerTimeoutError"):
            f.result(timeout=10)
        a.submit(np.ones(4, np.float32), "bucket 1")        # lane 1: its own fate
        later = a.submit(np.ones(4, np.float32), "bucket 2")  # lane 0 again
        with pytest.raises(LaneError, match="not sent, an earlier all-reduce of this lane"):
            later.result(timeout=10)
    finally:
        a.close()
        b.close()


def test_close_fails_what_is_pending_and_refuses_more() -> None:
    link, (a, b) = engines(lanes=1)
    link.silent.add(1)
    pending = a.submit(np.ones(16, np.float32), "bucket 0")
    a.close()
    b.close()
    with pytest.raises(LaneError, match="closed"):
        pending.result(timeout=10)
    with pytest.raises(LaneError, match="closed"):
        a.submit(np.ones(4, np.float32)).result(timeout=1)


def test_job_id_of_reads_the_header_field() -> None:
    for job in (0, 1, 258, 0xFFFF):
        head = wire.Header(msg_type=MsgType.RESULT, flags=Flags.NONE, job_id=job, slot=3, exp=0,
                           count=2, round=0, offset=0)
        assert job_id_of(wire.encode(head, np.zeros(K, np.int32), K)) == job
    assert job_id_of(b"\x02") == -1


def test_bad_lane_sets_are_refused() -> None:
    link = OracleLink([1], 1, 4)
    spec = LaneSpec(JobConfig(1, 1, 4, K))
    with pytest.raises(ValueError, match="distinct job ids"):
        LaneEngine(link.transport(0), [spec, spec])
    with pytest.raises(ValueError, match="at least one lane"):
        LaneEngine(link.transport(0), [])
