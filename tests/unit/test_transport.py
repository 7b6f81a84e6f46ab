"""netsum.workers.transport, netsum.workers.api and netsum.workers.cli over real sockets on 127.0.0.1, against plain
peers written here: an echo peer that turns each DATA into its RESULT (the sum of a one-worker
job) and drops/duplicates some, and a frame peer that takes frames apart and builds the reply
with scapy.  These check the shells, not aggregation (the P4 switch is tested elsewhere)."""
from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from checks import assert_sum_of_inputs
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from netsum.wire import HEADER_BYTES, UDP_PORT, MsgType
from netsum.workers import Endpoint, FrameTransport, UdpTransport, Worker, allreduce, wire
from netsum.workers.cli import main, synthetic
from netsum.workers.core import JobConfig, Timing
from netsum.workers.errors import ProtocolStateError, TransportError, WorkerTimeoutError
from netsum.workers.transport import parse_hostport

TIMING = Timing(rto_initial=0.02, rto_min=0.005, rto_max=0.2, progress_deadline=3.0)
LOCAL = Endpoint.parse("02:00:00:00:00:01", "10.0.0.1", 40001)
SERVICE = Endpoint.parse("02:00:00:00:00:fe", "10.0.0.254")
#: The K of every job here, given explicitly (not the default): the sizes below are counted in
#: blocks of 32 (94 chunks, 5 blocks on 4 slots) and the echo peer answers at this K.
K = 32


def to_result(payload: bytes) -> bytes:
    """A one-worker job's switch: the sum is the contribution itself."""
    h = wire.decode_header(payload, K)
    head = wire.Header(msg_type=MsgType.RESULT, flags=wire.Flags.NONE, job_id=h.job_id,
                       slot=h.slot, exp=h.exp, count=1, round=h.round, offset=h.offset)
    return wire.encode(head, None, K)[:HEADER_BYTES] + payload[HEADER_BYTES:]


class Peer:
    """A UDP peer thread on 127.0.0.1 applying `handle(datagram, index) -> replies`."""

    def __init__(self, handle: Callable[[bytes, int], list[bytes]]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.address = self.sock.getsockname()
        self.handle = handle
        self.count = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self) -> None:
        while not self.stop.is_set():
            try:
                data, sender = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            self.count += 1
            for reply in self.handle(data, self.count):
                self.sock.sendto(reply, sender)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def lossy_echo() -> Iterator[Peer]:
    def handle(data: bytes, i: int) -> list[bytes]:
        if i % 7 == 3:
            return []                                 # lost
        reply = to_result(data)
        return [reply, reply] if i % 5 == 0 else [reply]  # duplicated
    peer = Peer(handle)
    yield peer
    peer.close()


def test_udp_allreduce_with_loss(lossy_echo: Peer) -> None:
    x = synthetic(1, 0, 3000)
    job = JobConfig(job_id=3, num_workers=1, num_slots=16, k=K)
    with UdpTransport(lossy_echo.address, bind=("127.0.0.1", 0)) as t:
        res = allreduce(x, t, job, timing=TIMING)
        assert t.counters.sent == res.stats.packets_sent
    assert_sum_of_inputs([res], [x], K)
    assert res.stats.retransmissions > 0 and res.stats.duplicates > 0
    assert res.stats.chunks == 94


def test_worker_threads_rounds_across_calls(lossy_echo: Peer) -> None:
    job = JobConfig(job_id=3, num_workers=1, num_slots=4, k=K)
    with UdpTransport(lossy_echo.address, bind=("127.0.0.1", 0)) as t:
        w = Worker(t, job, TIMING)
        first = w.allreduce(np.ones(160, np.float32))   # 5 blocks on 4 slots
        second = w.allreduce(np.full(160, 2.0, np.float32))
    # Slot 0 carries 3 uses per call (bootstrap, blocks 0 and 4), the others 2; the second
    # call starts where the first ended.
    assert first.next_rounds == (3, 2, 2, 2)
    assert second.next_rounds == (6, 4, 4, 4) == w.next_rounds
    np.testing.assert_array_equal(second.tensor, np.full(160, 2.0, np.float32))


@pytest.fixture
def echo() -> Iterator[Peer]:
    peer = Peer(lambda data, i: [to_result(data)])
    yield peer
    peer.close()


def test_a_speculating_worker_skips_the_bootstrap_when_magnitudes_repeat(echo: Peer) -> None:
    """Worker(speculate=True): the first call of a length agrees its exponents (bootstrap);
    the next one of the same length predicts them from its maxima and, where they hold, sends
    its data at once; where a block's magnitude moved, that block goes again.  The rounds per
    slot (5 blocks on 4 slots) worked out from the schedule of docs/quantization.md."""
    job = JobConfig(job_id=3, num_workers=1, num_slots=4, k=K)
    x = np.linspace(-1.0, 1.0, 160, dtype=np.float32)
    with UdpTransport(echo.address, bind=("127.0.0.1", 0)) as t:
        w = Worker(t, job, TIMING, speculate=True)
        first = w.allreduce(x)                    # bootstrap, then blocks 0-3 and 4 on slot 0
        assert first.next_rounds == (3, 2, 2, 2) and first.stats.bootstrap_packets == 4
        second = w.allreduce(x * 0.9)             # the same binades: every prediction holds
        assert second.stats.bootstrap_packets == 0 and second.stats.misses == 0
        assert second.next_rounds == (5, 3, 3, 3)
        y = x.copy()
        y[:32] *= 8.0                             # block 0 three binades up: a miss
        third = w.allreduce(y)
        assert third.stats.misses == 1 and third.next_rounds == (8, 4, 4, 4)
        other = w.allreduce(np.ones(40, np.float32))   # another length: no prediction
        assert other.stats.bootstrap_packets == 2 and other.stats.misses == 0
    for res, want in ((first, x), (second, x * 0.9), (third, y), (other, np.ones(40))):
        assert_sum_of_inputs([res], [np.asarray(want, np.float32)], K)


def frame_peer_handle(data: bytes, i: int) -> list[bytes]:
    """Dissect with scapy, check what the worker built, answer with a scapy-built frame
    (scapy fills in both checksums, so the worker's UDP checksum check is exercised)."""
    p = Ether(data)
    assert p[IP].src == "10.0.0.1" and p[IP].dst == "10.0.0.254" and p[UDP].dport == UDP_PORT
    ip_sum = p[IP].chksum
    del p[IP].chksum
    assert Ether(bytes(p))[IP].chksum == ip_sum
    reply = (Ether(src=p.dst, dst=p.src) / IP(src=p[IP].dst, dst=p[IP].src)
             / UDP(sport=UDP_PORT, dport=p[UDP].sport) / Raw(to_result(bytes(p[UDP].payload))))
    out = [bytes(Ether(dst="ff:ff:ff:ff:ff:ff") / ARP())] if i == 1 else []
    if i == 2:
        out.append(bytes(reply)[:-3])                              # truncated: rejected
        other = reply.copy()
        other[IP].dst = "10.0.0.9"
        out.append(bytes(other))                                   # someone else's
    return out + [bytes(reply)]


def test_frame_transport_allreduce() -> None:
    peer = Peer(frame_peer_handle)
    try:
        x = synthetic(2, 0, 1000)
        with FrameTransport(peer.address, LOCAL, SERVICE, k=K) as t:
            res = allreduce(x, t, JobConfig(job_id=9, num_workers=1, num_slots=8, k=K),
                            timing=TIMING)
            assert t.counters.malformed == 1 and t.counters.foreign == 2
            # the last one refused: the frame for 10.0.0.9 (after the truncated one)
            assert "destination" in t.counters.last_error and "10.0.0.9" in \
                t.counters.last_error
    finally:
        peer.close()
    assert_sum_of_inputs([res], [x], K)


def test_silent_service_times_out_and_worker_refuses_more() -> None:
    peer = Peer(lambda data, i: [])
    try:
        with UdpTransport(peer.address, bind=("127.0.0.1", 0)) as t:
            w = Worker(t, JobConfig(1, 2, 4, K),
                       Timing(rto_initial=0.01, rto_min=0.005, progress_deadline=0.3))
            with pytest.raises(WorkerTimeoutError, match="no result for 0.3"):
                w.allreduce(np.ones(100, np.float32))
            with pytest.raises(ProtocolStateError, match="slot state is unknown"):
                w.allreduce(np.ones(100, np.float32))
        assert peer.count > 4  # it retransmitted while waiting
    finally:
        peer.close()


def test_bad_tensor_does_not_break_worker(lossy_echo: Peer) -> None:
    with UdpTransport(lossy_echo.address, bind=("127.0.0.1", 0)) as t:
        w = Worker(t, JobConfig(3, 1, 4, K), TIMING)
        with pytest.raises(Exception, match="offset 2"):
            w.allreduce(np.array([1, 2, np.nan], np.float32))
        assert lossy_echo.count == 0  # nothing was sent
        w.allreduce(np.ones(10, np.float32))


def test_bind_conflict_is_a_clear_error() -> None:
    with UdpTransport(("127.0.0.1", 9), bind=("127.0.0.1", 0)) as t:
        with pytest.raises(TransportError, match="cannot bind UDP 127.0.0.1:"):
            UdpTransport(("127.0.0.1", 9), bind=t.address)


@pytest.mark.parametrize("text, default, expect", [
    ("10.0.0.1:5", None, ("10.0.0.1", 5)), ("10.0.0.1", 7, ("10.0.0.1", 7)),
    ("10.0.0.1:", 7, ("10.0.0.1", 7)), ("x:5", None, ValueError), ("10.0.0.1", None, ValueError),
    ("10.0.0.1:70000", None, ValueError), ("10.0.0.1:ab", None, ValueError),
])
def test_parse_hostport(text: str, default: int | None, expect: object) -> None:
    if expect is ValueError:
        with pytest.raises(ValueError):
            parse_hostport(text, default)
    else:
        assert parse_hostport(text, default) == expect


def test_cli_udp_check(lossy_echo: Peer, capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    out = tmp_path / "sum.npy"
    host, port = lossy_echo.address
    code = main(["--job", "3", "--workers", "1", "--slots", "8", "--k", str(K),
                 "--udp", f"{host}:{port}",
                 "--bind", "127.0.0.1:0", "--size", "500", "--rank", "0", "--check",
                 "--iterations", "2", "--rto", "0.02", "--output", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert text.count("check ok") == 2 and "iteration 1: 500 elements" in text
    assert np.load(out).shape == (500,)


@pytest.mark.parametrize("argv, message", [
    (["--workers", "2", "--slots", "4", "--udp", "127.0.0.1", "--size", "5"], "--job"),
    (["--job", "1", "--workers", "0", "--slots", "4", "--udp", "127.0.0.1", "--size", "5"],
     "num_workers must be"),
    (["--job", "1", "--workers", "2", "--slots", "4", "--size", "5"], "exactly one of --udp"),
    (["--job", "1", "--workers", "2", "--slots", "4", "--udp", "127.0.0.1"], "--input and --size"),
    (["--job", "1", "--workers", "2", "--slots", "4", "--udp", "nohost", "--size", "5"],
     "IPV4:PORT"),
    (["--job", "1", "--workers", "2", "--slots", "4", "--frames", "127.0.0.1:9", "--size", "5"],
     "--frames needs --mac, --ip"),
    (["--job", "1", "--workers", "2", "--slots", "4", "--frames", "127.0.0.1:9", "--size", "5",
      "--mac", "zz", "--ip", "10.0.0.1", "--service-mac", "02:00:00:00:00:01",
      "--service-ip", "10.0.0.2"], "bad MAC"),
    (["--job", "1", "--workers", "2", "--slots", "4", "--udp", "127.0.0.1", "--size", "5",
      "--rank", "2"], "--rank must be in 0..1"),
    (["--job", "1", "--workers", "2", "--slots", "4", "--udp", "127.0.0.1",
      "--input", "/nonexistent.npy"], "cannot load"),
])
def test_cli_usage_errors(argv: list[str], message: str,
                          capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors (missing required option)
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_cli_timeout_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    peer = Peer(lambda data, i: [])
    try:
        host, port = peer.address
        code = main(["--job", "1", "--workers", "2", "--slots", "2", "--k", str(K),
                     "--udp", f"{host}:{port}", "--bind", "127.0.0.1:0", "--size", "50",
                     "--timeout", "0.2"])
    finally:
        peer.close()
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("netsum-worker: error: job 1: no STATUS from the switch "
                                        "for any of the 2 waiting slots")
    assert "; no result for 0.2" in err
    assert err.count("\n") == 1


def test_allreduce_rejects_non_transport() -> None:
    with pytest.raises(TypeError, match="transport must have send"):
        allreduce(np.ones(4, np.float32), object(), JobConfig(1, 1, 1))  # type: ignore[arg-type]


def test_cli_input_file_keeps_shape(lossy_echo: Peer, tmp_path, capsys) -> None:  # type: ignore
    src, dst = tmp_path / "grad.npy", tmp_path / "sum.npy"
    grad = np.linspace(-3, 3, 120).reshape(10, 12)          # float64 is accepted
    np.save(src, grad)
    host, port = lossy_echo.address
    code = main(["--job", "3", "--workers", "1", "--slots", "4", "--k", str(K),
                 "--udp", f"{host}:{port}",
                 "--bind", "127.0.0.1:0", "--input", str(src), "--output", str(dst),
                 "--json", "--rto", "0.02"])
    assert code == 0, capsys.readouterr()
    row = capsys.readouterr().out.strip()
    assert '"elements": 120' in row and '"check": null' in row
    out = np.load(dst)
    assert out.shape == (10, 12) and out.dtype == np.float32
    np.testing.assert_allclose(out, grad, rtol=1e-6, atol=1e-6)


def test_cli_rejects_nan_input_in_one_line(tmp_path, capsys) -> None:  # type: ignore
    src = tmp_path / "bad.npy"
    np.save(src, np.array([1.0, np.inf], np.float32))
    code = main(["--job", "3", "--workers", "1", "--slots", "4", "--udp", "127.0.0.1:9",
                 "--bind", "127.0.0.1:0", "--input", str(src)])
    err = capsys.readouterr().err
    assert code == 1 and "offset 1" in err and err.count("\n") == 1
