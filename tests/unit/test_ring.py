"""The host all-reduces (netsum.workers.ring, workers.ps): schedule, messages, results, failures.

The schedule is checked by simulating it on plain numpy arrays (no sockets) against the sum;
the TCP implementations run as threads on 127.0.0.1 and their results are checked against the
float64 sum within the documented bound (netsum.tensors, which shares no code with the ring)
and against each other bit for bit (integer sums of the same agreed exponents are exact).
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from netsum.rig import free_udp_ports
from netsum.tensors import check_result, reference, synthetic_inputs
from netsum.workers import quant
from netsum.workers.errors import NonFiniteError, ProtocolStateError, WorkerTimeoutError
from netsum.workers.hostnet import Peer, PeerError, parse_peers, tcp_counters
from netsum.workers.ps import HostServer
from netsum.workers.ring import HostJob, HostResult, HostRing
from netsum.workers.ringplan import (HEADER, Header, Hello, Kind, RingWireError, pieces, receives,
                              recv_segment, segments, send_segment, steps)
from netsum.wire import K_DEFAULT

#: The K of the rings under test (HostJob's default) and so of the fake neighbours below: a
#: neighbour that says another K is refused at HELLO.
K = K_DEFAULT

# -- the schedule, simulated ------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("nb", [1, 3, 7, 64])
def test_schedule_simulated_sums_every_segment(n: int, nb: int) -> None:
    """Run the step schedule on arrays: every rank must end with the sum of every block, and
    each rank must send 2(n-1) segments (2(n-1)/n of the tensor)."""
    rng = np.random.default_rng(n * 100 + nb)
    data = [rng.integers(-1000, 1000, size=nb) for _ in range(n)]
    acc = [d.copy() for d in data]
    segs = segments(nb, n)
    sent_blocks = [0] * n
    for g in range(steps(n)):
        # Everything sent at step g is the state before the step (simultaneous exchange).
        msgs = {}
        for r in range(n):
            lo, hi = segs[send_segment(r, g, n)]
            msgs[(r + 1) % n] = (send_segment(r, g, n), acc[r][lo:hi].copy())
            sent_blocks[r] += hi - lo
        for r, (seg, vals) in msgs.items():
            assert seg == recv_segment(r, g, n)
            lo, hi = segs[seg]
            if g <= n - 2:
                acc[r][lo:hi] += vals
            else:
                acc[r][lo:hi] = vals
    total = np.sum(data, axis=0)
    for r in range(n):
        assert np.array_equal(acc[r], total)
    if n > 1:
        assert sum(sent_blocks) == 2 * (n - 1) * nb      # each step: a permutation of segments
        for r in range(n):
            assert abs(sent_blocks[r] - 2 * (n - 1) * nb / n) <= 2 * (n - 1)


def test_segments_and_pieces_cover_the_blocks() -> None:
    assert segments(10, 4) == [(0, 2), (2, 5), (5, 7), (7, 10)]
    assert segments(2, 4) == [(0, 0), (0, 1), (1, 1), (1, 2)]
    assert [(p.first_block, p.blocks) for p in pieces(5, 12, 3)] == [(5, 3), (8, 3), (11, 1)]
    assert pieces(3, 3, 8) == []
    # Every block arrives once in the reduce-scatter half and once in the all-gather half,
    # except this rank's own segment (all-gather only) and the one it completes (rs only).
    got = receives(1, 3, 9, 2)
    assert [g for g, _ in got] == sorted(g for g, _ in got)
    assert sum(p.blocks for _, p in got) == 2 * 2 * 9 // 3


def test_header_and_hello_round_trip_and_reject() -> None:
    h = Header(Kind.VALUES, 7, 70000, 3, 123456, 64)
    raw = h.encode()
    assert len(raw) == HEADER == 16
    back = Header.decode(raw)
    assert (back.kind, back.job, back.call, back.step, back.first_block, back.blocks) == (
        Kind.VALUES, 7, 70000 & 0xFFFF, 3, 123456, 64)
    with pytest.raises(RingWireError, match="version"):
        Header.decode(raw[:1] + b"\x09" + raw[2:])
    with pytest.raises(RingWireError, match="kind"):
        Header.decode(b"\x63" + raw[1:])
    hello = Hello("ring", 2, 4, 32, 9)
    assert Hello.decode(hello.encode()) == hello
    with pytest.raises(RingWireError, match="magic"):
        Hello.decode(b"\0" * len(hello.encode()))


def test_parse_peers() -> None:
    assert parse_peers("10.0.0.1, 10.0.0.2:9000") == (Peer("10.0.0.1", 28276),
                                                      Peer("10.0.0.2", 9000))
    for bad, msg in (("10.0.0.1:x", "not a number"), (":80", "no host"),
                     ("h:70000", "not in 1..65535")):
        with pytest.raises(ValueError, match=msg):
            parse_peers(bad)
    with pytest.raises(ValueError, match="listed twice"):
        HostJob(1, parse_peers("127.0.0.1:5,127.0.0.1:5"), 0)


# -- over TCP on loopback -----------------------------------------------------------------------


def _peers(n: int) -> tuple[Peer, ...]:
    return tuple(Peer("127.0.0.1", p) for p in free_udp_ports(n))


def _run_all(n: int, body: Callable[[int], Any], timeout: float = 60) -> list[Any]:
    """body(rank) in one thread per rank; returns results, or the exceptions raised."""
    out: list[Any] = [None] * n

    def run(r: int) -> None:
        try:
            out[r] = body(r)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out[r] = exc
    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a rank hung"
    return out


def _direct(xs: list[np.ndarray], k: int) -> np.ndarray:
    """The integer path written out: max exponents, quantize each, sum, dequantize."""
    n = len(xs)
    agreed = np.max([quant.block_exponents(x, k) for x in xs], axis=0)
    total = np.sum([quant.quantize(x, agreed, n, k).astype(np.int64) for x in xs], axis=0)
    return quant.dequantize(total, agreed, n, xs[0].size)


@pytest.mark.parametrize("cls", [HostRing, HostServer])
@pytest.mark.parametrize("n,size,k", [(1, 100, 32), (2, 1000, 32), (3, 10_001, 64),
                                      (5, 3, 32), (4, 50_000, 32)])
def test_allreduce_is_exact_and_agrees(cls: type, n: int, size: int, k: int) -> None:
    xs = synthetic_inputs(n, (size,), seed=n + size)
    ref = reference(xs, k)
    peers = _peers(n)

    def body(r: int) -> HostResult:
        with cls(HostJob(5, peers, r, k=k, piece_bytes=4096, timeout=20)) as h:
            res = h.allreduce(xs[r])
            return h.allreduce(xs[r] * 2)           # a second call on the same connections
    results = _run_all(n, body)
    direct = _direct([x * 2 for x in xs], k)
    for r, res in enumerate(results):
        assert isinstance(res, HostResult), res
        verdict = check_result(res.tensor / 2, ref)
        assert verdict.ok, (r, verdict.problem)
        assert np.array_equal(res.tensor, direct)
        if n > 1:
            assert res.stats.bytes_sent > 0 and res.stats.segments_sent > 0
            assert res.stats.chunks == len(res.stats.latencies)
    if n > 1:
        # A rank may complete every piece itself (fewer blocks than ranks); not all of them.
        assert sum(r.stats.chunks for r in results) > 0


def test_ring_moves_2_n_minus_1_over_n_of_the_tensor() -> None:
    n, size = 4, 64_000
    xs = synthetic_inputs(n, (size,), seed=1)
    peers = _peers(n)
    results = _run_all(n, lambda r: HostRing(HostJob(1, peers, r)).allreduce(xs[r]))
    payload = 4 * size * 2 * (n - 1) / n
    for res in results:
        assert isinstance(res, HostResult), res
        # + headers, the exponent pass (1/4K of the values) and BEGIN
        assert payload <= res.stats.bytes_sent <= payload * 1.02


def test_shape_is_kept_and_nan_fails_before_connecting() -> None:
    peers = _peers(2)
    xs = synthetic_inputs(2, (3, 50), seed=2)
    results = _run_all(2, lambda r: HostRing(HostJob(1, peers, r)).allreduce(xs[r]))
    assert all(isinstance(r, HostResult) and r.tensor.shape == (3, 50) for r in results)
    bad = np.ones(10, dtype=np.float32)
    bad[4] = np.nan
    t = time.monotonic()
    with HostRing(HostJob(1, _peers(2), 0, timeout=5)) as ring:
        with pytest.raises(NonFiniteError, match="offset 4"):
            ring.allreduce(bad)
    assert time.monotonic() - t < 1


def test_missing_peer_is_named_after_the_timeout() -> None:
    peers = _peers(3)
    t = time.monotonic()
    with HostRing(HostJob(1, peers, 0, timeout=0.5)) as ring:
        with pytest.raises(PeerError) as info:
            ring.allreduce(np.ones(100, dtype=np.float32))
    assert info.value.rank == 1 and info.value.peer == peers[1] and info.value.timed_out
    assert f"rank 1 ({peers[1]})" in str(info.value)
    assert time.monotonic() - t < 3
    with pytest.raises(ProtocolStateError, match="previous all-reduce failed"):
        ring.allreduce(np.ones(100, dtype=np.float32))


def test_length_mismatch_names_the_peer() -> None:
    peers = _peers(2)
    out = _run_all(2, lambda r: HostRing(HostJob(1, peers, r, timeout=5)).allreduce(
        np.ones(100 + r, dtype=np.float32)))
    assert isinstance(out[0], PeerError) and out[0].rank == 1
    assert "all-reduces 101 elements, this worker 100" in str(out[0])


def test_wrong_job_is_refused_by_both_sides() -> None:
    peers = _peers(2)
    out = _run_all(2, lambda r: HostRing(HostJob(1 + r, peers, r, timeout=3)).allreduce(
        np.ones(10, dtype=np.float32)))
    assert all(isinstance(e, PeerError) for e in out), out
    text = " | ".join(map(str, out))
    assert "job 2 (expected 1)" in text or "job 1 (expected 2)" in text


def _fake_left(peers: tuple[Peer, ...], me: int, n: int, script: Callable[[socket.socket],
               None]) -> threading.Thread:
    """A left neighbour of rank `me` that shakes hands correctly, then runs `script`."""
    left = (me - 1) % n

    def run() -> None:
        deadline = time.monotonic() + 5
        while True:
            try:
                s = socket.create_connection((peers[me].host, peers[me].port), timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)
        hello = Hello("ring", left, n, K, 1).encode()
        s.sendall(Header(Kind.HELLO, 1, 0, 0, 0, len(hello)).encode() + hello)
        s.recv(HEADER + len(hello), socket.MSG_WAITALL)     # the answer: nothing left unread
        script(s)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _fake_right(peers: tuple[Peer, ...], me: int, n: int) -> socket.socket:
    """A right neighbour that accepts, answers HELLO and then only reads."""
    right = (me + 1) % n
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((peers[right].host, peers[right].port))
    ls.listen(1)

    def run() -> None:
        s, _ = ls.accept()
        s.recv(HEADER + 16)
        hello = Hello("ring", right, n, K, 1).encode()
        s.sendall(Header(Kind.HELLO, 1, 0, 0, 0, len(hello)).encode() + hello)
        while s.recv(65536):
            pass
    threading.Thread(target=run, daemon=True).start()
    return ls


def _begin_and_exponents(s: socket.socket, length: int, n: int, me: int) -> None:
    """What rank me's left neighbour sends in call 1 up to the values: BEGIN and every
    exponent piece rank me expects (exponent 140 everywhere)."""
    s.sendall(Header(Kind.BEGIN, 1, 1, 0, length, 0).encode())
    for g, p in receives(me, n, quant.num_blocks(length, K), 16384):
        s.sendall(Header(Kind.EXPONENTS, 1, 1, g, p.first_block, p.blocks).encode()
                  + bytes([140]) * p.blocks)


def test_peer_closing_mid_stream_is_named() -> None:
    n = 2
    peers = _peers(n)
    def script(s: socket.socket) -> None:
        _begin_and_exponents(s, 1000, n, 0)
        s.close()
    # With n = 2 rank 0's left and right are both rank 1: the fake is the left; the right is a
    # real listener that reads (so only the left's close can fail the call).
    right = _fake_right(peers, 0, n)
    _fake_left(peers, 0, n, script)
    with HostRing(HostJob(1, peers, 0, timeout=3)) as ring:
        with pytest.raises(PeerError, match=r"rank 1 .*closed the connection at values") \
                as info:
            ring.allreduce(np.ones(1000, dtype=np.float32))
    assert not info.value.timed_out
    right.close()


def test_values_beyond_the_contributions_are_refused() -> None:
    n, length = 2, 2 * K                  # one block per rank
    peers = _peers(n)

    def script(s: socket.socket) -> None:
        _begin_and_exponents(s, length, n, 0)
        nb = quant.num_blocks(length, K)
        lo, hi = segments(nb, n)[send_segment(1, 0, n)]
        # One contribution is at most 2^s = 2^29 for n = 2; send 2^30.
        vals = struct.pack(f">{(hi - lo) * K}i", *([1 << 30] * ((hi - lo) * K)))
        s.sendall(Header(Kind.VALUES, 1, 1, 0, lo, hi - lo).encode() + vals)
        time.sleep(2)
    right = _fake_right(peers, 0, n)
    _fake_left(peers, 0, n, script)
    with HostRing(HostJob(1, peers, 0, timeout=3)) as ring:
        with pytest.raises(PeerError, match=r"rank 1 .*values beyond"):
            ring.allreduce(np.ones(length, dtype=np.float32))
    right.close()


def test_deadline_bounds_the_call() -> None:
    n = 2
    peers = _peers(n)

    def script(s: socket.socket) -> None:
        _begin_and_exponents(s, 10, n, 0)
        time.sleep(3)                      # then silent: no values
    right = _fake_right(peers, 0, n)
    _fake_left(peers, 0, n, script)
    t = time.monotonic()
    with HostRing(HostJob(1, peers, 0, timeout=10)) as ring:
        with pytest.raises(WorkerTimeoutError, match="deadline.*from rank 1"):
            ring.allreduce(np.ones(10, dtype=np.float32), deadline=0.5)
    assert time.monotonic() - t < 2
    right.close()


def test_tcp_counters_see_segments() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    assert tcp_counters(a).segments_out == 0          # not TCP: zeros, no error
    a.close()
    b.close()
    ls = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(ls.getsockname())
    s, _ = ls.accept()
    c.sendall(b"x" * 100_000)
    s.recv(1)
    got = tcp_counters(c)
    assert got.data_segments_out >= 2 and got.segments_out >= got.data_segments_out
    for x in (c, s, ls):
        x.close()


# -- netsum-worker --algo ring|ps ---------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["--algo", "ring", "--job", "1", "--workers", "2", "--size", "10"], "needs --peers"),
    (["--algo", "ps", "--job", "1", "--workers", "3", "--peers", "127.0.0.1:1,127.0.0.1:2",
      "--size", "10"], "lists 2 addresses for --workers 3"),
    (["--algo", "ring", "--job", "1", "--workers", "2", "--peers", "127.0.0.1:x,127.0.0.1:2",
      "--size", "10"], "port 'x' is not a number"),
    (["--algo", "ina", "--job", "1", "--workers", "2", "--udp", "10.0.0.254", "--size", "10"],
     "--algo ina needs --slots"),
])
def test_worker_cli_usage_errors(argv: list[str], message: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    from netsum.workers.cli import main
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_worker_cli_ring_checks_and_reports(tmp_path: Any,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Two netsum-worker mains (threads) run a ring with --check, --start-at, --latencies and
    --output; the JSON lines carry the switch all-reduce's keys."""
    import json

    from netsum.workers.cli import main
    peers = ",".join(str(p) for p in _peers(2))
    start = time.time() + 0.5
    argv = ["--algo", "ring", "--job", "3", "--workers", "2", "--peers", peers, "--size",
            "5000", "--check", "--json", "--start-at", str(start)]
    codes = _run_all(2, lambda r: main([*argv, "--rank", str(r), "--output",
                                        str(tmp_path / f"out{r}.npy"), "--latencies",
                                        str(tmp_path / f"lat{r}.npy")]))
    assert codes == [0, 0]
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["check"] for r in rows] == [True, True]
    for key in ("elements_per_s", "packets_sent", "retransmissions", "chunk_latency_p50_ms",
                "start_late_s", "bytes_sent"):
        assert all(key in r for r in rows), key
    a, b = (np.load(tmp_path / f"out{r}.npy") for r in range(2))
    assert np.array_equal(a, b) and a.shape == (5000,)
    assert len(np.load(tmp_path / "lat0.npy")) + len(np.load(tmp_path / "lat1.npy")) > 0
