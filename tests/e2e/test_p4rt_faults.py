"""P4Runtime under bad input and contention, against a real `netsum-switch` daemon that forwards
traffic the whole time: malformed updates and reads of every entity kind, oversize batches,
clients racing for primary, a backup's writes, clients that vanish mid-stream or never
arbitrate, and 4k requests with the daemon's threads and memory measured.

The data plane runs tests/p4programs/stateful.p4 (compiled by netsum-p4c): a sender puts
frames on switch port 1 and every frame must come out of port 2 exactly as the program says
(worked out by hand in `expected_frame`), and the per-flow counter, the register and the direct
counter must count exactly the frames sent: any half-applied or wrongly accepted write, or a
stalled packet loop, shows up there.  The fuzz and robustness tests next to this one
(test_p4rt_fuzz, test_p4rt_robustness) cover table/PRE write semantics and garbage messages on an
in-process server; this file adds the other entity kinds, the process boundary and load.
"""
from __future__ import annotations

import os
import queue
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from netsum import p4c as compiler
from helpers import ROOT, SwitchDaemon, p4rt_client
from netsum.procs import ProcessGroup
from p4rt_faults import STATS_ETYPE, Ids, classify_entry, malformed_read, malformed_update
from fuzzing import fuzz_count, fuzz_rng
from netsum.p4rt.client import Stream, SwitchClient
from netsum.p4rt.errors import ClientError, SwitchUnreachable

DST, SRC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
FLOWS = 64
OK, ALREADY_EXISTS = 0, 6
CLIENT_CODES = {3, 5, 6, 7, 8, 9, 11, 12}      # never OK, UNKNOWN (2) or INTERNAL (13)
#: Bytes of resident-memory growth allowed per request in the leak test: 10 % of the daemon's
#: warm RSS (68 MiB) spread over 10k requests, as the test's earlier form allowed; ~17 times
#: what the RSS really does after the warm-up (up to 40 bytes per request measured).
LEAK_BUDGET = 700


def expected_frame(flow: int, k: int) -> bytes:
    """stateful.p4 on the k-th frame (1-based) of `flow`, by hand: accumulate stores
    min(k, 100) in totals[flow] and in stats.total; the unconfigured meters colour GREEN (0);
    arith sets mix = src[7:0] ++ dst[15:8] = 0x0200, delta = 0x0200 - 3, sat = sat |+| 255 =
    255 and total = ~total << 2; classify's entry sends it to port 2."""
    total = (~min(k, 100) << 2) & 0xFFFFFFFF
    return DST + SRC + struct.pack("!HIIBBHhB", STATS_ETYPE, flow, total, 0, 0, 0x0200,
                                   0x0200 - 3, 255)


def input_frame(flow: int) -> bytes:
    return DST + SRC + struct.pack("!HIIBBHhB", STATS_ETYPE, flow, 0, 0, 0, 0, 0, 0)


@dataclass
class Traffic:
    """Frames into port 1 (whose fixed peer is `tx_port`) at a steady rate from one thread,
    checked out of port 2 (whose fixed peer is `rx_port`) by another."""
    port1: tuple[str, int] = ("127.0.0.1", 0)
    rate: float = 400.0
    sent: Counter[int] = field(default_factory=Counter)
    got: Counter[int] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.tx.bind(("127.0.0.1", 0))
        self.tx_port = self.tx.getsockname()[1]
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.rx.bind(("127.0.0.1", 0))
        self.rx.settimeout(0.2)
        self.rx_port = self.rx.getsockname()[1]
        self._run = threading.Event()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._send, daemon=True),
                         threading.Thread(target=self._recv, daemon=True)]

    def start(self) -> None:
        self._run.set()
        for t in self._threads:
            t.start()

    def _send(self) -> None:
        seq = 0
        while not self._stop.is_set():
            if not self._run.wait(0.1):
                continue
            flow = seq % FLOWS
            self.tx.sendto(input_frame(flow), self.port1)
            self.sent[flow] += 1
            seq += 1
            time.sleep(1 / self.rate)

    def _recv(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.rx.recv(2048)
            except socket.timeout:
                continue
            flow = struct.unpack_from("!I", data, 14)[0] if len(data) >= 18 else -1
            if flow not in range(FLOWS):
                self.wrong.append(f"unexpected frame {data.hex()}")
                continue
            self.got[flow] += 1
            want = expected_frame(flow, self.got[flow])
            if data != want:
                self.wrong.append(f"flow {flow} #{self.got[flow]}: {data.hex()} != {want.hex()}")

    @property
    def total(self) -> int:
        return sum(self.sent.values())

    def quiesce(self, timeout: float = 20.0) -> None:
        """Pause the sender and wait until every frame sent came out (or fail)."""
        self._run.clear()
        time.sleep(0.2)                     # let an in-flight send finish counting
        deadline = time.monotonic() + timeout
        while self.got != self.sent and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not self.wrong, self.wrong[:3]
        assert self.got == self.sent, f"lost frames: sent {self.total}, got {sum(self.got.values())}"

    def resume(self) -> None:
        self._run.set()

    def close(self) -> None:
        self._stop.set()
        self._run.set()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout=5)
        self.tx.close()
        self.rx.close()


@dataclass
class Live:
    daemon: SwitchDaemon
    address: str
    ids: Ids
    main: SwitchClient
    traffic: Traffic
    info: p4info_pb2.P4Info

    def client(self, election_id: int | None,
               options: Sequence[tuple[str, object]] = ()) -> SwitchClient:
        return p4rt_client(self.address, 0, election_id, options=options)

    @property
    def pid(self) -> int:
        assert self.daemon.child is not None
        return self.daemon.child.popen.pid

    def check_data_plane(self) -> None:
        """Every frame so far forwarded exactly; the counters and registers count them all."""
        self.traffic.quiesce()
        try:
            sent = self.traffic.sent
            cells = {e.counter_entry.index.index: e.counter_entry.data for e in self.main.read(
                [pb.Entity(counter_entry=pb.CounterEntry(counter_id=self.ids.per_flow))])}
            regs = {e.register_entry.index.index: e.register_entry.data.bitstring
                    for e in self.main.read([pb.Entity(register_entry=pb.RegisterEntry(
                        register_id=self.ids.totals))])}
            for f in range(1024):
                assert cells[f].packet_count == sent[f], (f, cells[f], sent[f])
                assert cells[f].byte_count == sent[f] * len(input_frame(f))
                assert int.from_bytes(regs[f], "big") == min(sent[f], 100), f
            entries = self.main.read([pb.Entity(table_entry=pb.TableEntry(
                table_id=self.ids.classify, counter_data=pb.CounterData()))])
            assert len(entries) == 1, entries
            assert entries[0].table_entry.counter_data.packet_count == self.traffic.total
            pre = pb.Entity()
            pre.packet_replication_engine_entry.multicast_group_entry.SetInParent()
            assert self.main.read([pre]) == []
            meters = self.main.read([pb.Entity(meter_entry=pb.MeterEntry(meter_id=self.ids.rate))])
            assert all(not m.meter_entry.HasField("config") for m in meters)
        finally:
            self.traffic.resume()


def proc_status(pid: int) -> tuple[int, int]:
    """(threads, resident KiB) of a process, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if ":" in line)
    return int(fields["Threads"]), int(fields["VmRSS"].split()[0])


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("p4rt_faults")
    src = ROOT / "tests" / "p4programs" / "stateful.p4"
    res = compiler.compile_source(src.read_text(), str(src))
    info = text_format.Parse(res.p4info_text(), p4info_pb2.P4Info())
    ids = Ids.of(info)
    with ProcessGroup(tmp / "logs") as procs:
        traffic = Traffic()
        daemon = SwitchDaemon(procs, [f"1@udp:127.0.0.1:0=127.0.0.1:{traffic.tx_port}",
                                      f"2@udp:127.0.0.1:0=127.0.0.1:{traffic.rx_port}"])
        traffic.port1 = ("127.0.0.1", daemon.start().udp_ports[1])
        main = p4rt_client(daemon.grpc_addr, 0, election_id=1)
        try:
            main.connect()
            assert main.is_primary
            main.set_pipeline(info, res.json_text().encode())
            main.write([pb.Update(type=pb.Update.INSERT, entity=pb.Entity(
                table_entry=classify_entry(ids, 0, 0, 0, 1023, 2, 10)))])
            traffic.start()
            yield Live(daemon, daemon.grpc_addr, ids, main, traffic, info)
        finally:
            traffic.close()
            main.close()


def _write_codes(c: SwitchClient, updates: list[pb.Update]) -> list[int]:
    try:
        c.write(updates)
    except ClientError as exc:
        assert exc.code == "UNKNOWN", (exc.code, exc.detail)
        errs = exc.statuses
        assert len(errs) == len(updates)
        assert all(e.message for e in errs if e.code)
        return [e.code for e in errs]
    return [OK] * len(updates)


def malformed_round(live: Live, rng: random.Random, n: int, stats: Counter[str],
                    batch_max: int = 20) -> int:
    """n malformed updates in batches of 1..batch_max, and a malformed read per batch; returns
    the number of RPCs."""
    done = rpcs = 0
    while done < n:
        batch = [malformed_update(live.ids, rng)
                 for _ in range(min(rng.randint(1, batch_max), n - done))]
        codes = _write_codes(live.main, [u for u, _, _ in batch])
        for (u, kind, allowed), code in zip(batch, codes):
            assert code in allowed, f"{kind}: code {code}, expected one of {allowed}: {u}"
            stats[kind] += 1
        done += len(batch)
        entity, allowed = malformed_read(live.ids, rng)
        with pytest.raises(ClientError) as err:
            live.main.read([entity])
        assert grpc.StatusCode[err.value.code].value[0] in allowed, (err.value.code, entity)
        assert err.value.detail
        stats["read"] += 1
        rpcs += 2
    return rpcs


@pytest.mark.slow
def test_malformed_requests_of_every_entity_kind(live: Live) -> None:
    rng, _ = fuzz_rng("p4rt malformed", 31)
    stats: Counter[str] = Counter()
    malformed_round(live, rng, fuzz_count(3000), stats)
    print("malformed updates per kind:", dict(stats))
    assert len(stats) == 8 + 5 + 1, stats          # every kind, and the reads
    live.check_data_plane()


def test_oversize_batches(live: Live) -> None:
    ids = live.ids
    # Past the server's 4 MB write limit (MAX_WRITE_BYTES; a pipeline config may be bigger):
    # refused as a whole, nothing applied.
    fat = classify_entry(ids, 0x100000, (1 << 48) - 1, 2000, 3000, 3, 5)
    fat.action.action.params[0].value = bytes(100_000)
    huge = [pb.Update(type=pb.Update.INSERT, entity=pb.Entity(table_entry=fat))] * 45
    assert sum(u.ByteSize() for u in huge) > 4 << 20
    with pytest.raises(ClientError) as err:
        live.main.write(huge)
    assert err.value.code == "RESOURCE_EXHAUSTED"
    # A big batch that fits the request but not the table (64 entries, one in use): the first
    # 63 go in, every later one is RESOURCE_EXHAUSTED, in order; then all are deleted.
    # Per-update errors travel in the status trailer; a few thousand of them pass gRPC's
    # default 16 KB metadata limit, so a controller sending such batches raises it.
    wide = live.client(1, options=[("grpc.max_metadata_size", 8 << 20)])
    big = [pb.Update(type=pb.Update.INSERT, entity=pb.Entity(table_entry=classify_entry(
        ids, 0x100000 + i, (1 << 48) - 1, 2000, 3000, 3, 5))) for i in range(3000)]
    codes = _write_codes(wide, big)
    assert codes == [OK] * 63 + [8] * (3000 - 63), Counter(codes)
    for u in big:
        u.type = pb.Update.DELETE
    codes = _write_codes(wide, big)
    assert codes == [OK] * 63 + [5] * (3000 - 63), Counter(codes)
    wide.close()
    live.check_data_plane()


def _arbitration(stream: Stream, timeout: float = 5.0) -> tuple[int, int]:
    """The last arbitration message within `timeout` of the first: (status code, primary id)."""
    got: tuple[int, int] | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = stream.recv(0.3 if got is not None else deadline - time.monotonic())
        except queue.Empty:
            if got is not None:
                return got
            continue
        assert msg is not None, f"stream ended: {stream.error}"
        if msg.WhichOneof("update") == "arbitration":
            got = (msg.arbitration.status.code, msg.arbitration.election_id.low)
    assert got is not None, "no arbitration message"
    return got


def test_controllers_racing_for_primary_and_backup_writes(live: Live) -> None:
    ids = live.ids
    hijack = pb.Update(type=pb.Update.INSERT, entity=pb.Entity(
        table_entry=classify_entry(ids, 0, 0, 0, 1023, 3, 50)))   # would steal the traffic
    for rnd in range(3):
        racers = [live.client(100 + 10 * rnd + i) for i in range(8)]
        gate = threading.Barrier(len(racers))

        def go(c: SwitchClient) -> None:
            gate.wait()
            c.stream = Stream(c.stub)        # connect() would eat the first reply
            c.stream.arbitrate(0, c.endpoint.election_id or 0)
        threads = [threading.Thread(target=go, args=(c,)) for c in racers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            ids = {c: (c.endpoint.election_id or (0, 0))[1] for c in racers}
            top = max(ids.values())
            for c in racers:
                assert c.stream is not None
                status = _arbitration(c.stream)
                assert status == ((OK if ids[c] == top else ALREADY_EXISTS), top), \
                    (ids[c], status)
            # Backups (and the fixture's controller, now a backup too) cannot write.
            for c in racers[:-1] + [live.main]:
                with pytest.raises(ClientError) as err:
                    c.write([hijack])
                assert (err.value.code, err.value.detail) == ("PERMISSION_DENIED", "Not primary")
            # A second connection with the primary's election id is refused.
            twin = live.client(top)
            try:
                with pytest.raises(SwitchUnreachable) as refused:
                    twin.connect(retry=False)
                assert refused.value.code == "INVALID_ARGUMENT", refused.value
            finally:
                twin.close()
            # The primary vanishes without a goodbye: the next one is told within seconds.
            racers[-1].channel.close()
            assert _arbitration(racers[-2].stream) == (OK, top - 1)  # type: ignore[arg-type]
        finally:
            for c in racers:
                c.close()
        assert live.main.stream is not None
        assert _arbitration(live.main.stream) == (OK, 1)
    live.check_data_plane()


KILLED_CLIENT = """
import sys, time
from p4.v1 import p4runtime_pb2 as pb
from netsum.p4rt.client import Endpoint, SwitchClient
c = SwitchClient(Endpoint(sys.argv[1], 0, (0, 1000)), timeout=None)
c.connect()
assert c.arbitration.status.code == 0
print("primary", flush=True)
e = pb.Entity(register_entry=pb.RegisterEntry())
while True:
    for resp in c.stub.Read(pb.ReadRequest(device_id=0, entities=[e])):
        pass
"""


@pytest.mark.slow
def test_clients_that_vanish_mid_stream(live: Live) -> None:
    # A primary killed (SIGKILL) while it reads: the seat comes back to the next controller.
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, live.address],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "primary"
        assert live.main.stream is not None
        assert _arbitration(live.main.stream) == (ALREADY_EXISTS, 1000)
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert _arbitration(live.main.stream) == (OK, 1)
    finally:
        proc.kill()
        proc.wait()
    # Reads cancelled half-way, streams cancelled before and after arbitrating.
    c = live.client(None)
    try:
        for _ in range(20):
            call = c.stub.Read(pb.ReadRequest(device_id=0, entities=[
                pb.Entity(register_entry=pb.RegisterEntry())]))
            next(call)
            call.cancel()
            Stream(c.stub).close()
            s = Stream(c.stub)
            s.arbitrate(0, 0)       # backup under the fixture's controller
            s.close()
    finally:
        c.close()
    # Raw TCP that is not HTTP/2, and a connection left hanging: the server carries on.
    host, port = live.address.rsplit(":", 1)
    hanging = socket.create_connection((host, int(port)))
    for junk in (b"", b"GET / HTTP/1.1\r\n\r\n", os.urandom(300), b"PRI * HTTP/2.0\r\n"):
        with socket.create_connection((host, int(port))) as raw:
            raw.sendall(junk)
    # Streams that never arbitrate hold at most the 16 connection seats, so requests still
    # get threads; the 17th stream is turned away.
    idler = live.client(None)
    idle = [Stream(idler.stub) for _ in range(16 - 1)]      # + the fixture's controller
    try:
        time.sleep(0.5)
        extra = Stream(idler.stub)
        assert extra.recv(5) is None
        assert extra.error is not None
        assert extra.error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert len(live.main.read([pb.Entity(table_entry=pb.TableEntry())])) == 1
    finally:
        for s in idle:
            s.close()
        idler.close()
        hanging.close()
    live.check_data_plane()


@pytest.mark.slow
def test_no_thread_or_memory_leak_over_3k_requests(live: Live) -> None:
    """3k requests of every kind above after a 1k warm-up; the daemon's threads and resident
    memory measured after the warm-up, after every cycle and at the end (figures printed).
    The RSS budget is a rate, LEAK_BUDGET bytes per measured request (2 MiB over 3k): the
    same rate the earlier budget of 10 % of the warm RSS (68 MiB) over 10k requests allowed,
    so a leak of ~0.7 KiB or more per RPC fails either way, in a third of the requests.  What
    the RSS did over the 3k: +124 KiB (40 bytes per request; +132 KiB over 10k), and a
    deliberate leak of 4 KiB per Write (~1/3 of the RPCs) grows it by 4.4 MiB and fails.

    What the RSS does (measured on this branch, NETSUM_FUZZ_SCALE=10, 101,154 requests):
    67,456 -> 68,584 KiB (+1.7 %), growing 22, 11, 7 and 4.5 bytes per request over the four
    quarters of the run -- decelerating, so not a per-request leak; a census of the Python
    objects alive (gc) before and after 1,500 cycles of write + read + stream in one process
    differs by nothing, so what grows is native memory (gRPC core and allocator arenas)
    settling, not objects the server keeps."""
    rng, _ = fuzz_rng("p4rt leak", 77)
    stats: Counter[str] = Counter()
    requests = 0

    shared = live.client(None)

    def cycle(n_updates: int) -> int:
        """Malformed writes and reads, then streams: on the shared channel and on new
        connections, arbitrating as backups or not at all, closed at once or after the
        arbitration reply; a wildcard read.  Returns the number of RPCs."""
        issued = malformed_round(live, rng, n_updates, stats, batch_max=4)
        for i in range(10):
            fresh = live.client(None) if i % 2 else None
            s = Stream((fresh or shared).stub)
            if i % 3:
                s.arbitrate(0, 0)
                try:
                    s.recv(2)
                except queue.Empty:
                    pass
            s.close()
            if fresh is not None:
                fresh.close()
        live.main.read([pb.Entity(counter_entry=pb.CounterEntry())])
        return issued + 11

    # Warm-up: every pool thread (40 reads at once grow the server's pool to its cap; beyond
    # the 8 served at once they are refused) and cache the server will ever use, then the
    # baseline.
    def read() -> None:
        try:
            live.main.read([pb.Entity(register_entry=pb.RegisterEntry())])
        except ClientError as exc:
            if exc.code != "RESOURCE_EXHAUSTED":
                raise
    for _ in range(3):
        readers = [threading.Thread(target=read) for _ in range(40)]
        for t in readers:
            t.start()
        for t in readers:
            t.join()
        requests += len(readers)
    while requests < 1000:
        requests += cycle(100)
    time.sleep(1)
    base_threads, base_rss = proc_status(live.pid)
    samples = [(requests, base_threads, base_rss)]
    while requests < 1000 + fuzz_count(3000):
        requests += cycle(200)
        samples.append((requests, *proc_status(live.pid)))
    time.sleep(1)
    threads, rss = proc_status(live.pid)
    print(f"p4rt leak: {requests} requests; threads {base_threads} -> {threads}; "
          f"RSS {base_rss} -> {rss} KiB ({100 * (rss - base_rss) / base_rss:+.1f} %)")
    print("p4rt leak samples (requests, threads, RSS KiB):", samples)
    shared.close()
    # What matters is that nothing grows with the number of requests.  The exact count may
    # move by a thread or two (gRPC and the executor start threads lazily under load), so
    # the bound is on growth: a leak of one thread per stream or per RPC would add hundreds.
    peak = max(t for _, t, _ in samples)
    assert peak <= base_threads + 4, samples
    assert threads <= base_threads + 4
    measured = requests - samples[0][0]
    assert (rss - base_rss) * 1024 <= measured * LEAK_BUDGET, (measured, base_rss, rss)
    live.check_data_plane()
