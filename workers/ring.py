"""Host-based ring all-reduce over TCP: the baseline in-network aggregation is measured against,
and the host fallback for a job that gets no switch slots.

    job = HostJob(job_id=1, peers=parse_peers("10.0.0.1,10.0.0.2,10.0.0.3"), rank=0)
    with HostRing(job) as ring:
        result = ring.allreduce(grad)          # result.tensor, result.stats
    # or, once: ring_allreduce(grad, job)

Owns: the connections to the two ring neighbours (kept across calls), the exponent agreement
and the integer sum as two passes of the same bandwidth-optimal ring (netsum.workers.ringplan has the
schedule), the event loop that streams pieces to the right while reading from the left, and
the statistics.

Same payload, chunking and result as the switch: block floating point with K values per block
(netsum.workers.quant); the agreed exponent of a block is the max of every rank's proposal (pass 1:
uint8 per block, max-reduced), the values are quantized with it and summed as int32 (pass 2),
then dequantized.  Integer sums are exact and the agreed exponents are the ones the switch
computes, so the result equals the switch's bit for bit, within the same documented bound.

Failure: every error names the peer (`hostnet.PeerError`: rank and address): a peer that
closes or resets its connection, sends something unexpected (wrong step, values beyond what
its contributions can sum to), or sends nothing for `timeout` seconds; `deadline` bounds a
whole call.  After a failed call the ring is closed (its streams are out of step).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import cast

import numpy as np
import numpy.typing as npt

from netsum.workers import quant
from netsum.workers.errors import ProtocolStateError
from netsum.workers.hostnet import (Peer, PeerError, TcpCounters, accept_peer, await_hello,
                             connect_peer, listen, parse_peers, tcp_counters)
from netsum.workers.hoststream import Inbound, Link, PassCounters, message, pump
from netsum.wire import K_DEFAULT, K_SUPPORTED, MAX_WORKERS
from netsum.workers.ringplan import (Header, Hello, Kind, Piece, pieces, receives, segments,
                              send_segment, steps)

__all__ = ["HostJob", "HostStats", "HostResult", "HostAllreduce", "HostRing", "PassResult",
           "ring_allreduce", "wire_format", "Peer", "PeerError", "parse_peers", "PIECE_BYTES"]

PIECE_BYTES = 16384     # default piece: enough to amortise a header, small enough to pipeline


@dataclass(frozen=True, slots=True)
class HostJob:
    """One rank's view of a host all-reduce job: every rank lists the same peers, in ring order
    (rank i listens on peers[i] and sends to peers[i + 1]).  Order the ring so that neighbours
    are close (hosts of one switch next to each other): each link then carries one stream."""
    job_id: int
    peers: tuple[Peer, ...]
    rank: int
    k: int = K_DEFAULT
    piece_bytes: int = PIECE_BYTES
    timeout: float = 10.0          # seconds without progress before a PeerError

    def __post_init__(self) -> None:
        n = len(self.peers)
        if not 1 <= n <= MAX_WORKERS:
            raise ValueError(f"a host job needs 1..{MAX_WORKERS} peers, got {n}")
        if not 0 <= self.rank < n:
            raise ValueError(f"rank must be in 0..{n - 1}, got {self.rank}")
        if len(set(self.peers)) != n:
            dup = next(p for p in self.peers if self.peers.count(p) > 1)
            raise ValueError(f"peer {dup} is listed twice")
        if not 0 <= self.job_id <= 0xFFFF:
            raise ValueError(f"job_id must be in 0..65535, got {self.job_id}")
        if self.k not in K_SUPPORTED:
            raise ValueError(f"K must be one of {', '.join(map(str, K_SUPPORTED))}, got {self.k}")
        if self.piece_bytes < 4 * self.k:
            raise ValueError(f"piece_bytes must hold a block ({4 * self.k} bytes), got "
                             f"{self.piece_bytes}")
        if self.timeout <= 0:
            raise ValueError("timeout must be positive")

    @property
    def workers(self) -> int:
        return len(self.peers)

    @property
    def left(self) -> int:
        return (self.rank - 1) % self.workers

    @property
    def right(self) -> int:
        return (self.rank + 1) % self.workers


@dataclass(frozen=True, slots=True)
class HostStats:
    algorithm: str
    elapsed: float                 # the call, without connection set-up
    connect_s: float               # connection set-up in this call (0 after the first)
    exponents_s: float             # pass 1: exponent agreement
    bytes_sent: int                # of this worker's streams (headers + payload)
    bytes_received: int
    messages_sent: int
    segments_sent: int             # TCP segments the kernel sent (data and pure ACKs)
    data_segments_sent: int        # of which carried data (retransmissions included)
    retransmissions: int           # TCP data segments the kernel sent again
    chunks: int                    # pieces whose sum came from a peer (latencies: one each)
    latencies: np.ndarray = field(compare=False, repr=False)

    def latency_percentiles(self, q: tuple[float, ...] = (50, 99)) -> tuple[float, ...]:
        if not len(self.latencies):
            return tuple(float("nan") for _ in q)
        return tuple(float(v) for v in np.percentile(self.latencies, q))


@dataclass(frozen=True, slots=True)
class HostResult:
    tensor: np.ndarray             # float32, the input's shape
    stats: HostStats
    exponents: np.ndarray = field(compare=False, repr=False)   # agreed, biased, per block
    bound: np.ndarray = field(compare=False, repr=False)       # per element, before float32


@dataclass(slots=True)
class PassResult:
    """What one pass (exponents or values) of a host all-reduce moved."""
    counters: PassCounters
    messages: int = 0
    latencies: list[float] = field(default_factory=list)


class HostAllreduce:
    """What the host all-reduces share: the call (validation, the exponent pass, quantizing,
    the value pass, dequantizing, statistics) and the life cycle.  Subclasses connect their
    peers (`_connect`) and move one pass (`_pass`)."""

    ALGORITHM = ""

    def __init__(self, job: HostJob, clock: Callable[[], float] = time.monotonic) -> None:
        self.job = job
        self.clock = clock
        self._links: list[Link] = []
        self._calls = 0
        self._broken = ""

    def __enter__(self) -> "HostAllreduce":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        for ln in self._links:
            ln.sock.close()
        self._links = []

    def _hello(self, rank: int) -> Hello:
        j = self.job
        return Hello(self.ALGORITHM, rank, j.workers, j.k, j.job_id)

    def _connect(self, deadline: float) -> None:
        raise NotImplementedError

    def _pass(self, acc: np.ndarray, kind: Kind, length: int, end: float | None) -> PassResult:
        raise NotImplementedError

    @property
    def connected(self) -> bool:
        return bool(self._links)

    def connect(self, timeout: float | None = None) -> float:
        """Connect to the peers now (the first all-reduce does it otherwise); seconds taken.
        `timeout` defaults to the job's."""
        if self._broken:
            raise ProtocolStateError(f"host job {self.job.job_id}: a previous call failed "
                                     f"({self._broken})")
        t0 = self.clock()
        if self.job.workers > 1 and not self.connected:
            try:
                self._connect(t0 + (self.job.timeout if timeout is None else timeout))
            except BaseException as exc:
                self._broken = type(exc).__name__
                self.close()
                raise
        return self.clock() - t0

    def allreduce(self, tensor: object, deadline: float | None = None) -> HostResult:
        """Sum `tensor` with every peer's (same length).  `deadline`: seconds for the whole
        call (connection set-up included), None for no bound beyond `job.timeout`."""
        if self._broken:
            raise ProtocolStateError(f"host job {self.job.job_id}: a previous all-reduce "
                                     f"failed ({self._broken}); start a new {type(self).__name__}")
        j = self.job
        x = quant.as_tensor(tensor)
        shape = np.shape(cast("npt.ArrayLike", tensor))    # as_tensor accepted it
        nb = quant.num_blocks(len(x), j.k)
        proposals = quant.block_exponents(x, j.k)   # NaN/Inf fail here, before any sending
        t0 = self.clock()
        end = None if deadline is None else t0 + deadline
        try:
            connect_s = 0.0
            if j.workers > 1 and not self.connected:
                self._connect(t0 + j.timeout if end is None else min(end, t0 + j.timeout))
                connect_s = self.clock() - t0
            before = self._tcp()
            t1 = self.clock()
            self._calls += 1
            acc_e = proposals.reshape(nb, 1).copy()
            p1 = self._pass(acc_e, Kind.EXPONENTS, len(x), end)
            agreed = acc_e[:, 0].copy()
            t2 = self.clock()
            acc = quant.quantize(x, agreed, j.workers, j.k, proposals)
            p2 = self._pass(acc, Kind.VALUES, len(x), end)
            out = quant.dequantize(acc, agreed, j.workers, len(x))
            elapsed = self.clock() - t1
            tcp = self._tcp() - before
        except BaseException as exc:
            self._broken = type(exc).__name__
            self.close()
            raise
        c1, c2 = p1.counters, p2.counters
        stats = HostStats(self.ALGORITHM, elapsed, connect_s, t2 - t1, c1.sent + c2.sent,
                          c1.received + c2.received, p1.messages + p2.messages,
                          tcp.segments_out, tcp.data_segments_out, tcp.retransmissions,
                          len(p2.latencies),
                          np.asarray(p2.latencies, dtype=np.float64))
        return HostResult(out.reshape(shape), stats, agreed,
                          quant.error_bound(agreed, j.workers, j.k, len(x)))

    def _tcp(self) -> TcpCounters:
        total = TcpCounters()
        for ln in self._links:
            total = total + tcp_counters(ln.sock)
        return total


def wire_format(kind: Kind, k: int) -> tuple[int, np.dtype]:
    """(values per block, wire dtype) of a pass: one uint8 exponent, or K big-endian int32."""
    return (k, np.dtype(">i4")) if kind is Kind.VALUES else (1, np.dtype("u1"))


class HostRing(HostAllreduce):
    """One rank's ring: listens at once, connects on the first call (to its right, from its
    left), keeps both connections across calls.  A context manager; `close()` is idempotent."""

    ALGORITHM = "ring"

    def __init__(self, job: HostJob, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(job, clock)
        self._listener = listen(job.peers[job.rank], 2) if job.workers > 1 else None
        self._left: Link | None = None
        self._right: Link | None = None

    def close(self) -> None:
        super().close()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self._left = self._right = None

    def _connect(self, deadline: float) -> None:
        j = self.job
        if self._listener is None:
            raise ProtocolStateError("the ring is closed")
        right = connect_peer(j.right, j.peers[j.right], self._hello(j.rank), deadline,
                             self.clock)
        try:
            left, _ = accept_peer(self._listener, {j.left: j.peers[j.left]},
                                  self._hello(j.rank), self._hello, deadline, self.clock)
        except BaseException:
            right.close()
            raise
        try:
            await_hello(right, j.right, j.peers[j.right], self._hello(j.right), deadline,
                        self.clock)
        except BaseException:
            left.close()
            raise
        self._left = Link(left, j.left, j.peers[j.left])
        self._right = Link(right, j.right, j.peers[j.right])
        self._links = [self._left, self._right]
        # Nothing else connects to this rank: free the port.
        self._listener.close()
        self._listener = None

    def _pass(self, acc: np.ndarray, kind: Kind, length: int, end: float | None) -> PassResult:
        """One pass of the ring over `acc` (nb x width), in place: max of the exponents or sum
        of the values, on every rank (the schedule is netsum.workers.ringplan's)."""
        j = self.job
        n, r = j.workers, j.rank
        res = PassResult(PassCounters())
        if n == 1:
            return res
        assert self._left is not None and self._right is not None
        left, right = self._left, self._right
        nb = acc.shape[0]
        width, wire = wire_format(kind, j.k)
        piece_blocks = max(1, j.piece_bytes // (width * wire.itemsize))
        # |q| <= 2^s per rank, so a partial of c contributions is within c * 2^s.
        unit = 1 << quant.scale_shift(n)
        last_rs = n - 2
        total_steps = steps(n)
        call = self._calls
        contributed: dict[int, float] = {}

        def send(step: int, p: Piece) -> None:
            payload = acc[p.first_block:p.stop].astype(wire).tobytes()
            right.queue(message(kind, j.job_id, call, step, p, payload))
            res.messages += 1

        def handle(g: int, p: Piece, data: np.ndarray) -> None:
            rows = acc[p.first_block:p.stop]
            t = self.clock()
            if g <= last_rs:            # reduce-scatter: add this rank's contribution
                if kind is Kind.VALUES:
                    np.add(rows, data, out=rows)
                else:
                    np.maximum(rows, data, out=rows)
            else:                       # all-gather: the final sum
                rows[...] = data
            if g > last_rs and kind is Kind.VALUES:
                # From the first message carrying this rank's contribution to the sum's
                # arrival (the segment this rank completes itself has no such wait).
                res.latencies.append(t - contributed[p.first_block])
            if g + 1 < total_steps:
                send(g + 1, p)
                if g + 1 <= last_rs:
                    contributed.setdefault(p.first_block, t)

        if kind is Kind.EXPONENTS:
            # Each call opens with its element count: peers given different lengths fail
            # here, naming the peer, instead of mid-stream.
            right.queue(Header(Kind.BEGIN, j.job_id, call, 0, length, 0).encode())
        now = self.clock()
        lo, hi = segments(nb, n)[send_segment(r, 0, n)]
        for p in pieces(lo, hi, piece_blocks):
            send(0, p)
            contributed[p.first_block] = now

        def describe(g: int) -> str:
            return f"{'reduce-scatter' if g <= last_rs else 'all-gather'} step {g}"

        limit = (lambda g: unit * min(g + 1, n)) if kind is Kind.VALUES else None
        inbound = Inbound(left, kind, j.job_id, call, receives(r, n, nb, piece_blocks), width,
                          wire, handle, limit,
                          begin=length if kind is Kind.EXPONENTS else None, describe=describe)
        res.counters = pump([right], [inbound], j.timeout, end,
                            f"host job {j.job_id}: the ring all-reduce", self.clock)
        return res


def ring_allreduce(tensor: object, job: HostJob, deadline: float | None = None) -> HostResult:
    """One ring all-reduce on fresh connections (a `HostRing` for one call)."""
    with HostRing(job) as ring:
        return ring.allreduce(tensor, deadline)
