"""The per-value passes of a call fused into C (workers/wquant.c, wcore.c) and the pieces
around them: the exponent proposals with the finiteness check in one pass, each result's
values dequantized straight into the output at accept time (with quant.dequantize's two
checks, raised after the call), `write_into` / `out=` (the input itself included, under loss,
duplication and reordering), and `AllreduceResult.bound` made when read.

Expectations come from outside the code under test: the proposals from math.frexp of each
block's peak, the sums from tests/exactsums.py (the integer reference from the inputs), the
overflow's offset and value and the bad block from hand-built inputs and switches.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from exactsums import expected_sums, reference_results, shift
from oracle import LossyLink, Network, OracleSwitch
from test_transport import Peer, to_result

from netsum.wire import HEADER_BYTES, MsgType
from netsum.workers import UdpTransport, Worker, allreduce, wire
from netsum.workers.core import CoreState, JobConfig, Timing, WorkerCore
from netsum.workers.errors import NonFiniteError, QuantError, SumOverflowError
from netsum.workers.native import NativeCore, native_status

pytestmark = pytest.mark.skipif(not native_status()[0],
                                reason=f"no compiled worker core: {native_status()[1]}")

FAST = Timing(rto_initial=0.004, rto_min=0.002, rto_max=0.05, progress_deadline=5.0)
F32_MAX = float(np.finfo(np.float32).max)
CORES = [WorkerCore, NativeCore]


def want_proposal(block: np.ndarray) -> int:
    """The least e with 2^e >= max|x|, clamped to [-126, 128], biased by 127; 0 for zeros."""
    peak = max(abs(float(v)) for v in block)
    if peak == 0:
        return 0
    m, ex = math.frexp(peak)
    return min(255, max(1, ex - (m == 0.5) + 127))


def test_proposals_are_the_least_power_of_two_above_each_peak() -> None:
    k = 32
    rng = np.random.default_rng(3)
    blocks = [rng.standard_normal(k) * 10.0 ** rng.uniform(-40, 38) for _ in range(60)]
    special = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0 ** -126, 2.0 ** -149, 2.0 ** -127 * 3,
               2.0 ** 127, F32_MAX, -F32_MAX, 1.5, 2.0 ** 100 * (1 + 2.0 ** -23)]
    for v in special:
        b = np.zeros(k)
        b[rng.integers(k)] = v
        blocks.append(b)
    blocks.append(np.full(k, -0.0))
    x = np.concatenate(blocks).astype(np.float32)
    x = np.concatenate([x, np.float32([3.0, -2.0 ** -140])])     # a partial last block
    want = [want_proposal(x[i:i + k]) for i in range(0, len(x), k)]
    job = JobConfig(job_id=1, num_workers=3, num_slots=8, k=k)
    for cls in CORES:
        assert list(cls(x, job, FAST)._proposals) == want, cls.__name__


@pytest.mark.parametrize("where, value", [(0, np.nan), (77, -np.inf), (95, np.inf),
                                          (101, np.nan)])
def test_the_first_nonfinite_element_is_named(where: int, value: float) -> None:
    x = np.ones(102, np.float32)                   # 4 blocks of 32, the last partial
    if where + 3 < len(x):
        x[where + 3] = np.inf                      # a later one is not the one named
    x[where] = value
    job = JobConfig(job_id=1, num_workers=2, num_slots=4, k=32)
    for cls in CORES:
        with pytest.raises(NonFiniteError) as info:
            cls(x, job, FAST)
        assert str(info.value) == str(NonFiniteError(where, float(value))), cls.__name__


def test_a_shard_names_the_tensors_offset() -> None:
    """Reduce-scatter rows are a padded copy: the index is mapped back to the tensor's."""
    x = np.ones(90, np.float32)
    x[61] = -np.inf                     # shards 30/30/30: rank 2's shard, its element 1
    job = JobConfig(job_id=1, num_workers=3, num_slots=4, k=32)
    with pytest.raises(NonFiniteError, match="offset 61 is -inf"):
        NativeCore(x, job, FAST, rank=0, shards=[30, 30, 30])


def lossy(seed: int, n: int, slots: int, k: int) -> Network:
    rng = np.random.default_rng(seed)
    switch = OracleSwitch(k=k, members={5: list(range(n))}, num_slots={5: slots})
    return Network(switch, LossyLink(rng, loss=0.1, dup=0.05, reorder=0.2),
                   LossyLink(rng, loss=0.1, dup=0.05, reorder=0.2))


def wide_inputs(seed: int, n: int, length: int) -> list[np.ndarray]:
    """Values over float32's range: blocks whose 2^(s-E) is beyond float32 (the quantizer's
    float64 path) and whose 2^(E-s) is below 2^-126 (the dequantizer's), and large ones."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = rng.standard_normal(length) * 10.0 ** rng.uniform(-20, 20, length)
        x[: length // 5] *= 2.0 ** -110
        x[length // 5: length // 4] = rng.standard_normal(length // 4 - length // 5) * 1e37
        x[rng.random(length) < 0.05] = 0.0
        # float32 subnormals alone (E clamped to 2^-126: both paths' float64 side), and
        # peaks near 2^-110 (2^(E-s) a float32 subnormal)
        x[length // 4: length // 4 + 64] = rng.standard_normal(64) * 1e-40
        x[length // 4 + 64: length // 4 + 128] = rng.standard_normal(64) * 1e-33
        out.append(x.astype(np.float32))
    return out


@pytest.mark.parametrize("cls", CORES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("length", [4096, 4000])
def test_in_place_under_loss_is_the_integer_reference(cls: type[WorkerCore],
                                                      length: int) -> None:
    """write_into(the input itself), 3 workers, links that lose, duplicate and reorder: each
    worker's input array ends holding the reference's sum, bit for bit (no block's result
    landed on an input not yet sent)."""
    n, slots, k = 3, 8, 32
    xs = wide_inputs(length, n, length)
    want = reference_results(xs, k)
    arrays = [x.copy() for x in xs]
    job = JobConfig(job_id=5, num_workers=n, num_slots=slots, k=k)
    cores = {r: cls(arrays[r], job, FAST) for r in range(n)}
    for r, core in cores.items():
        core.write_into(arrays[r])
    network = lossy(length + n, n, slots, k)
    network.run(cores)  # type: ignore[arg-type]
    assert sum(c.stats().retransmissions for c in cores.values()), "no loss exercised"
    for r, core in cores.items():
        res = core.result()
        assert res.tensor is arrays[r]
        assert arrays[r].tobytes() == want.tobytes(), f"rank {r}"


def test_results_into_a_fresh_output_and_a_shard() -> None:
    """Without write_into the compiled core's own array; a reduce-scatter's shard (its last
    block partial) lands at the shard's offsets."""
    n, k, length = 2, 32, 1000
    xs = wide_inputs(9, n, length)
    want = reference_results(xs, k)
    job = JobConfig(job_id=5, num_workers=n, num_slots=4, k=k)
    cores = {r: NativeCore(xs[r], job, FAST) for r in range(n)}
    lossy(1, n, 4, k).run(cores)  # type: ignore[arg-type]
    for core in cores.values():
        assert core.result().tensor.tobytes() == want.tobytes()
    shards = [333, 667]
    cores = {r: NativeCore(xs[r], job, FAST, rank=r, shards=shards) for r in range(n)}
    outs = [np.full(s, np.nan, np.float32) for s in shards]
    for r, core in cores.items():
        core.write_into(outs[r])
    lossy(2, n, 4, k).run(cores)  # type: ignore[arg-type]
    parts = []
    for r, core in cores.items():
        sub = [x[sum(shards[:r]):sum(shards[:r + 1])] for x in xs]
        parts.append(reference_results(sub, k))
        assert core.result().tensor.tobytes() == parts[r].tobytes(), f"rank {r}"


# -- the checks of dequantization, on hand-built switches --------------------------------
def run_reversed(core: WorkerCore, make_result: Callable[[bytes], bytes]) -> None:
    """Drive one core against a switch that answers every DATA with make_result(DATA),
    handing each batch of results back in reverse order (the later blocks first)."""
    pending = list(core.start(0.0).send)
    t = 0.0
    while core.state is CoreState.RUNNING:
        t += 0.001
        replies = [make_result(p) for p in pending if p[0] == MsgType.DATA]
        replies.sort(key=lambda r: -wire.decode_header(r, core._k).offset)
        pending = []
        for r in replies:
            pending += core.receive(r, t).send
        assert t < 10, "the call did not finish"


def doubled(k: int) -> Callable[[bytes], bytes]:
    """A switch of a two-worker job whose other member sent the same values: the sum is
    twice the contribution."""
    def make(data: bytes) -> bytes:
        values = np.frombuffer(data[HEADER_BYTES:], ">i4").astype(np.int64) * 2
        return to_result_k(data, (values.astype(">i4")).tobytes(), k)
    return make


def to_result_k(data: bytes, values: bytes, k: int) -> bytes:
    h = wire.decode_header(data, k)
    head = wire.Header(msg_type=MsgType.RESULT, flags=wire.Flags.NONE, job_id=h.job_id,
                       slot=h.slot, exp=h.exp, count=2, round=h.round, offset=h.offset,
                       workers=h.workers)
    return wire.encode(head, None, k)[:HEADER_BYTES] + values


def test_overflow_names_the_lowest_offset_whatever_the_order() -> None:
    """Twice 3e38 is beyond float32: the error names the lowest such element (hand-chosen:
    offset 40, in block 1; block 3's result comes first) and its value before the rounding,
    q = rint(x * 2^(s-E)) summed twice, times 2^(E-s), as both cores compute it."""
    k = 32
    x = np.full(128, 1.0, np.float32)
    x[[40, 100, 101]] = 3e38
    x[70] = -1e38                          # large, but twice it is still a float32
    s = shift(2)
    e = want_proposal(x[32:64]) - 127     # block 1's exponent: 128
    q = round(float(np.float32(3e38)) * 2.0 ** (s - e))
    want = str(SumOverflowError(40, 2 * q * 2.0 ** (e - s)))
    job = JobConfig(job_id=1, num_workers=2, num_slots=4, k=k)
    for cls in CORES:
        core = cls(x, job, FAST)
        run_reversed(core, doubled(k))
        with pytest.raises(SumOverflowError) as info:
            core.result()
        assert str(info.value) == want, cls.__name__


def test_nonzero_sums_under_exponent_zero_name_the_lowest_block() -> None:
    """Blocks 1 and 3 are zeros (agreed exponent 0); the switch returns a nonzero value in
    both (and an overflow in block 0): the error names block 1, as quant.dequantize does
    (this check before the overflow's)."""
    k = 32
    x = np.ones(128, np.float32)
    x[0] = 3e38
    x[32:64] = 0.0
    x[96:128] = 0.0
    double = doubled(k)

    def bad(data: bytes) -> bytes:
        out = bytearray(double(data))
        h = wire.decode_header(data, k)
        if h.offset in (32, 96) and h.round > 0:           # the blocks, not the bootstraps
            out[HEADER_BYTES + 4 * 5 + 3] = 1      # the sum of zeros is not zero
        return bytes(out)
    job = JobConfig(job_id=1, num_workers=2, num_slots=4, k=k)
    for cls in CORES:
        core = cls(x, job, FAST)
        run_reversed(core, bad)
        with pytest.raises(QuantError) as info:
            core.result()
        assert type(info.value) is QuantError
        assert str(info.value) == ("block 1 has agreed exponent 0 (all zero) but nonzero "
                                   "sums"), cls.__name__


# -- out= through the API, and the bound -------------------------------------------------
@pytest.fixture
def echo() -> Iterator[Peer]:
    def handle(data: bytes, i: int) -> list[bytes]:
        return [] if i % 11 == 4 else [to_result(data)]       # some lost
    peer = Peer(handle)
    yield peer
    peer.close()


def test_out_overlapping_the_input(echo: Peer) -> None:
    """out = the input shifted by a window of blocks and a bit: block b's result would land
    on the input of block b + 4, which is sent only after that result (4 slots); the input
    is copied first, and the sum is the input's (a one-worker job: its own values,
    quantized)."""
    k, length, at = 32, 3008, 4 * 32 + 3     # whole blocks: the rows are the input's memory
    job = JobConfig(job_id=3, num_workers=1, num_slots=4, k=k)
    rng = np.random.default_rng(5)
    buf = np.zeros(length + at, np.float32)
    buf[:length] = rng.standard_normal(length).astype(np.float32)
    want = reference_results([buf[:length].copy()], k)
    with UdpTransport(echo.address, bind=("127.0.0.1", 0)) as t:
        res = allreduce(buf[:length], t, job, timing=FAST, out=buf[at:])
    assert res.tensor.base is buf
    assert buf[at:].tobytes() == want.tobytes()


def test_worker_allreduce_in_place_and_a_bad_out(echo: Peer) -> None:
    k, length = 32, 1024
    job = JobConfig(job_id=3, num_workers=1, num_slots=4, k=k)
    x = np.random.default_rng(6).standard_normal(length).astype(np.float32)
    want = reference_results([x.copy()], k)
    with UdpTransport(echo.address, bind=("127.0.0.1", 0)) as t:
        w = Worker(t, job, FAST)
        with pytest.raises(ValueError, match="float32 array of 1024"):
            w.allreduce(x, out=np.empty(1000, np.float64))
        res = w.allreduce(x, out=x)            # torch's all_reduce(x): x is the sum
        assert res.tensor is x and x.tobytes() == want.tobytes()
        assert w.next_rounds is not None


def test_the_bound_is_made_when_read() -> None:
    """`bound` per element: n * 2^(E-s-1), E the inputs' agreed exponents (0 for a zero
    block), for the real elements only; one array, made once."""
    n, k, length = 2, 32, 1000
    xs = wide_inputs(4, n, length)
    xs[0][64:96] = xs[1][64:96] = 0.0
    job = JobConfig(job_id=5, num_workers=n, num_slots=4, k=k)
    cores = {r: NativeCore(xs[r], job, FAST) for r in range(n)}
    lossy(3, n, 4, k).run(cores)  # type: ignore[arg-type]
    pad = -length % k
    agreed, _ = expected_sums([np.concatenate([x, np.zeros(pad, np.float32)]) for x in xs], k)
    per_block = [0.0 if e == 0 else n * 2.0 ** (int(e) - 127 - shift(n) - 1) for e in agreed]
    want = np.repeat(per_block, k)[:length]
    res = cores[0].result()
    assert res._bound is None
    assert res.bound.dtype == np.float64 and np.array_equal(res.bound, want)
    assert res.bound is res.bound
