"""ECN marking under congestion end to end: a `netsum-switch` daemon runs real p4c's JSON of
tests/switch_p4/ecn.p4 (tests/switch_p4/p4c/, p4c-bm2-ss 1.2.5.16), `netsum-ctl` pushes the
pipeline, adds the route and sets port 2's queue rate, and IPv4 frames arrive on UDP-tunnel
port 1 in one burst.  ecn.p4 marks CE in egress when a packet found >= 10 packets ahead of it
(enq_qdepth).  Port 2's queue is 30 packets deep from the daemon's `--queue-depth 2:30`.  A
burst of 40 into a port draining 25 pkt/s: the queue holds 30 and drops the rest at its tail
(a few more get in as departures make room while the burst arrives); the first 10 cannot have
10 ahead of them and most later ones do.  With the rate back at 0 (not limited) the queue never
builds: all 40 pass, none marked.  Wall-clock bounds are loose on purpose (shared machine)."""
from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from helpers import BIN, ROOT, SwitchDaemon
from netsum.procs import ProcessGroup
from p4helpers import ipv4_checksum_ok

P4C = ROOT / "tests" / "switch_p4" / "p4c"
BURST, RATE, DEPTH, THRESHOLD = 40, 25, 30, 10
IDLE = 2.0         # seconds without a frame that end a burst's reception (40 ms apart at 25 pkt/s)


def ipv4_frame(seq: int) -> bytes:
    ip = bytearray(20)
    ip[0], ip[1] = 0x45, 1                       # ECT(1)
    ip[2:4] = (20 + 8).to_bytes(2, "big")
    ip[4:6] = seq.to_bytes(2, "big")
    ip[8], ip[9] = 64, 17
    ip[12:16], ip[16:20] = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + bytes(ip) + b"payload!"


def ctl(grpc_addr: str, *argv: str) -> str:
    r = subprocess.run([str(BIN / "netsum-ctl"), "--grpc-addr", grpc_addr, *argv],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (argv, r.stderr)
    return r.stdout


def burst(tx: socket.socket, port1: tuple[str, int], rx: socket.socket) -> list[bytes]:
    for seq in range(BURST):
        tx.sendto(ipv4_frame(seq), port1)
    got: list[bytes] = []
    rx.settimeout(IDLE + BURST / RATE)             # the first frame may wait for a start-up
    while len(got) < BURST:
        try:
            got.append(rx.recv(65536))
        except TimeoutError:
            break
        rx.settimeout(IDLE)
    return got


@pytest.mark.slow
def test_ecn_marks_only_when_the_port_is_slower_than_the_load(tmp_path: Path) -> None:
    with ProcessGroup(tmp_path / "logs") as procs, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        rx.bind(("127.0.0.1", 0))
        tx.bind(("127.0.0.1", 0))
        daemon = SwitchDaemon(procs, [
            f"1@udp:127.0.0.1:0,127.0.0.1:{tx.getsockname()[1]}",
            f"2@udp:127.0.0.1:0,127.0.0.1:{rx.getsockname()[1]}"],
            target_args=["--queue-depth", f"2:{DEPTH}"])
        port1 = ("127.0.0.1", daemon.start().udp_ports[1])
        addr = daemon.grpc_addr
        ctl(addr, "--p4info", str(P4C / "ecn.p4info.txtpb"), "pipeline", "push",
            str(P4C / "ecn.json"))
        ctl(addr, "table_add", "EcnIngress.ipv4_fwd", "EcnIngress.forward", "10.0.0.0/8",
            "=>", "2")
        assert "port 2" in ctl(addr, "set_queue_rate", str(RATE), "2")

        slow = burst(tx, port1, rx)
        seqs = [int.from_bytes(f[18:20], "big") for f in slow]
        assert seqs[:DEPTH] == list(range(DEPTH)) and seqs == sorted(seqs), seqs
        assert DEPTH <= len(slow) < BURST               # the tail of the burst is dropped
        assert all(ipv4_checksum_ok(f[14:34]) for f in slow)
        marked = [f[15] & 3 == 3 for f in slow]
        assert not any(marked[:THRESHOLD])           # fewer than 10 can be ahead of them
        assert sum(marked) >= DEPTH // 2, marked

        assert "port 2" in ctl(addr, "set_queue_rate", "0", "2")
        fast = burst(tx, port1, rx)
        assert [int.from_bytes(f[18:20], "big") for f in fast] == list(range(BURST))
        assert all(f[15] & 3 == 1 for f in fast)         # ECT(1) kept, never CE
