"""Reduce-scatter in the network through the lane engine (netsum.training.lanes, `submit(...,
shards=)`): the real worker core, three engines as three ranks, the test oracle of the switch.

Expectations come from the inputs: each rank's shard of the float64 sum (torch's
reduce_scatter_tensor layout: equal parts, the first `len % n` one longer), within the bound
of docs/quantization.md taken over the blocks a shard is cut into (blocks of K from the
shard's first element, as docs/protocol.md says), Inf/NaN where IEEE addition puts them.  And
what the downlinks carry: a block's sums only ever reach the rank that owns it (the others get
its header, an ACK); the only values a rank sees for another's blocks are the zeros of the
bootstrap uses that agree the first exponents (dest = every rank, docs/protocol.md).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from netsum.training.lanes import LaneEngine, LaneSpec
from netsum.wire import DEST_ALL, HEADER_BYTES, MsgType
from netsum.workers import JobConfig, Timing, wire
from test_training_lanes import TRANSPORTS, FrameLink, K, OracleLink, _Transport

INF, NAN = np.inf, np.nan


class Counting(_Transport):
    """The oracle link's transport, recording the RESULTs this rank received: (dest, has
    values, values all zero).  (A STATUS, the switch's answer to a retransmission for a slot
    still missing contributions, carries the slot's bitmap in v000, not sums.)"""

    def __init__(self, link: OracleLink, rank: int) -> None:
        super().__init__(link, rank)
        self.seen: list[tuple[int, bool, bool]] = []

    def receive(self, timeout: float) -> list[bytes]:
        out = super().receive(timeout)
        for p in out:
            h = wire.decode_header(p, K)
            if h.msg_type == MsgType.RESULT:
                self.seen.append((h.dest, len(p) > HEADER_BYTES,
                                  not any(p[HEADER_BYTES:])))
        return out


class FrameCounting(Counting, FrameLink):
    """Counting behind the frames API (the lanes run the compiled core on it)."""


def shards_of(length: int, n: int) -> list[int]:
    base, extra = divmod(length, n)
    return [base + (r < extra) for r in range(n)]


def shard_bound(xs: list[np.ndarray], start: int, length: int) -> np.ndarray:
    """The quantization bound over the shard [start, start + length), blocks of K from start."""
    n = len(xs)
    s = max(t for t in range(64) if n * 2 ** t <= 2 ** 31 - 1)
    out = np.zeros(length)
    for b in range(0, length, K):
        peak = max(float(np.max(np.abs(x[start + b:start + min(b + K, length)]))) for x in xs)
        if peak:
            e = min(max(math.ceil(math.log2(peak)), -126), 128)
            out[b:b + K] = n * 2.0 ** (e - s - 1)
    total = np.sum(np.stack([x[start:start + length] for x in xs]).astype(np.float64), axis=0)
    return out + 2.0 ** -24 * np.abs(total)


def run(inputs: list[list[np.ndarray]], lanes: int = 2, transport: str = "bytes"
        ) -> tuple[list[list[np.ndarray]], list[Counting], list[int]]:
    ranks = len(inputs)
    ids = list(range(20, 20 + lanes))
    link = OracleLink(ids, ranks, 8)
    specs = [LaneSpec(JobConfig(j, ranks, 8, K)) for j in ids]
    kind = FrameCounting if transport == "frames" else Counting
    ts = [kind(link, r) for r in range(ranks)]
    engines = [LaneEngine(ts[r], specs, Timing(progress_deadline=10.0), rank=r)
               for r in range(ranks)]
    assert all(e.native is (transport == "frames") for e in engines)
    try:
        futs = [[e.submit(x, f"t{i}", shards=shards_of(len(x), ranks))
                 for i, x in enumerate(inputs[r])] for r, e in enumerate(engines)]
        got = [[f.result(timeout=60).tensor for f in fs] for fs in futs]
        masks = [e.mask_rounds for e in engines]
    finally:
        for e in engines:
            e.close()
    return got, ts, masks


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_each_rank_gets_its_shard_of_the_sum_and_only_its_values_come_down(
        transport: str) -> None:
    rng = np.random.default_rng(5)
    sizes = [1, 3, 100, 97, 1000, 2 * K]
    inputs = [[(rng.standard_normal(m) * 10.0 ** rng.integers(-3, 3)).astype(np.float32)
               for m in sizes] for _ in range(3)]
    got, ts, masks = run(inputs, transport=transport)
    for i, m in enumerate(sizes):
        start = 0
        for r, length in enumerate(shards_of(m, 3)):
            xs = [inputs[q][i] for q in range(3)]
            want = np.sum(np.stack([x[start:start + length] for x in xs]).astype(np.float64),
                          axis=0)
            assert got[r][i].shape == (length,), (i, r)
            assert np.all(np.abs(got[r][i] - want) <= shard_bound(xs, start, length)), (i, r)
            start += length
    for r, t in enumerate(ts):
        owned = [has for d, has, _ in t.seen if d == r]
        others = [has for d, has, _ in t.seen if d not in (r, DEST_ALL)]
        boot = [zero for d, has, zero in t.seen if d == DEST_ALL]
        assert owned and all(owned), r                   # its own blocks: the sums
        assert others and not any(others), r             # the others' blocks: headers (ACKs)
        assert all(boot), r                              # bootstrap uses: zeros only
    assert masks == [0, 0, 0]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_inf_and_nan_land_in_the_owners_shard_where_ieee_puts_them(transport: str) -> None:
    rng = np.random.default_rng(9)
    xs = [rng.standard_normal(300).astype(np.float32) for _ in range(3)]
    xs[0][[5, 150]] = [INF, NAN]          # rank 0's and rank 1's shards
    xs[2][[5, 299]] = [-INF, -INF]        # Inf + -Inf at 5: NaN; rank 2's shard: -Inf
    ys = [rng.standard_normal(40).astype(np.float32) for _ in range(3)]   # no Inf: no mask
    got, _, masks = run([[xs[r], ys[r]] for r in range(3)], lanes=1, transport=transport)
    with np.errstate(invalid="ignore"):
        want = np.sum(np.stack([x.astype(np.float64) for x in xs]), axis=0)
    start = 0
    for r, length in enumerate(shards_of(300, 3)):
        g, w = got[r][0], want[start:start + length]
        assert np.array_equal(np.isnan(g), np.isnan(w)), r
        assert np.array_equal(np.isposinf(g), np.isposinf(w)), r
        assert np.array_equal(np.isneginf(g), np.isneginf(w)), r
        fin = np.isfinite(w)
        clean = [np.where(np.isfinite(x), x, 0).astype(np.float32) for x in xs]
        assert np.all(np.abs(g[fin] - w[fin]) <= shard_bound(clean, start, length)[fin]), r
        start += length
    assert masks == [1, 1, 1]             # every rank ran the one mask round, the lane aligned
    ysum = np.sum(np.stack(ys).astype(np.float64), axis=0)
    start = 0
    for r, length in enumerate(shards_of(40, 3)):
        assert np.allclose(got[r][1], ysum[start:start + length], atol=1e-5), r
        start += length
