"""The netsum-switch daemon as a subprocess, driven over UDP ports on 127.0.0.1: startup line,
forwarding, malformed frames, pcap files, clean exit on SIGTERM/SIGINT, one-line CLI errors."""
from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from helpers import checkout_env, free_udp_ports, switch_cmd, switch_module

CALC = struct.Struct(">BIIIB")


def start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return switch_module(args, cwd)[0]


@pytest.fixture
def calc_json(p4c_fixtures: Path) -> Path:
    return p4c_fixtures / "calc_state.json"


@pytest.fixture
def peer() -> Iterator[socket.socket]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(2.0)
    yield s
    s.close()


def calc_frame(op: int, a: int, b: int) -> bytes:
    return bytes(Ether(dst="02:00:00:00:00:0b", src="02:00:00:00:00:0a", type=0x1234)) + \
        CALC.pack(op, a, b, 0, 0)


def test_forwarding_malformed_pcap_and_sigterm(calc_json: Path, peer: socket.socket,
                                               tmp_path: Path) -> None:
    p1, p2, other = free_udp_ports(3)
    me = peer.getsockname()[1]
    proc = start(["--no-grpc", "--pcap", str(tmp_path), "-i", f"1@udp:127.0.0.1:{p1}="
                  f"127.0.0.1:{me}", "-i", f"2@udp:127.0.0.1:{p2}=127.0.0.1:{other}",
                  str(calc_json)], tmp_path)
    try:
        peer.sendto(calc_frame(0x2B, 40, 2), ("127.0.0.1", p1))
        data, addr = peer.recvfrom(2048)
        assert addr == ("127.0.0.1", p1)                 # replied on the ingress port
        assert CALC.unpack(data[14:28])[3] == 42
        for junk in (b"", b"\x01", os.urandom(13), os.urandom(40), os.urandom(3000)):
            peer.sendto(junk, ("127.0.0.1", p1))
        peer.sendto(calc_frame(0x2D, 50, 8), ("127.0.0.1", p1))
        while True:                                        # junk may produce outputs too
            data, _ = peer.recvfrom(2048)
            if len(data) >= 28 and data[14] == 0x2D:
                break
        assert CALC.unpack(data[14:28])[3] == 42
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "stopped: rx_packets=7" in out                 # stats line on exit
    name = f"udp_127.0.0.1_{p1}_127.0.0.1_{me}"
    ins = rdpcap(str(tmp_path / f"{name}_in.pcap"))
    outs = rdpcap(str(tmp_path / f"{name}_out.pcap"))
    assert len(ins) == 7 and len(outs) >= 2
    assert bytes(ins[0]) == calc_frame(0x2B, 40, 2)


def test_fixed_peer_and_sigint(calc_json: Path, peer: socket.socket, tmp_path: Path) -> None:
    """Output goes to the port's peer; a datagram from any other address is dropped before
    the program sees it and counted (udp_foreign), however well-formed."""
    p1 = free_udp_ports(1)[0]
    sink = peer.getsockname()[1]
    stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stranger.bind(("127.0.0.1", 0))
    stranger.settimeout(0.5)
    proc = start(["--no-grpc", "-i", f"1@udp:127.0.0.1:{p1},127.0.0.1:{sink}", str(calc_json)],
                 tmp_path)
    try:
        for _ in range(3):
            stranger.sendto(calc_frame(0x2B, 1, 1), ("127.0.0.1", p1))
        peer.sendto(calc_frame(0x2B, 2, 3), ("127.0.0.1", p1))
        data, _ = peer.recvfrom(2048)                      # output goes to the fixed peer
        assert CALC.unpack(data[14:28])[3] == 5            # the peer's frame, not the others
        with pytest.raises(TimeoutError):
            stranger.recvfrom(2048)
    finally:
        stranger.close()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "Traceback" not in err
    # The stopped line: one frame reached the program, the stranger's three were refused.
    assert "rx_packets=1 " in out and "udp_foreign=3" in out, out


def test_ready_line_reports_bound_udp_ports(calc_json: Path, peer: socket.socket,
                                            tmp_path: Path) -> None:
    """Ports asked for as `:0` show the port the OS bound (peer kept as given), and that port
    is the one that forwards: callers need not pick free ports first."""
    from netsum.rig import parse_ready_line

    sink = peer.getsockname()[1]
    other = free_udp_ports(1)[0]
    proc, line = switch_module(["--no-grpc", "-i", f"1@udp:127.0.0.1:0=127.0.0.1:{other}", "-i",
                              f"2@udp:127.0.0.1:0=127.0.0.1:{sink}", str(calc_json)], tmp_path)
    try:
        ready = parse_ready_line(line)
        assert ready is not None and ready.grpc_addr is None, line
        assert set(ready.udp_ports) == {1, 2} and 0 not in ready.udp_ports.values(), line
        assert f"2@udp:127.0.0.1:{ready.udp_ports[2]}=127.0.0.1:{sink}" in line
        # calc_state sends the answer back out of the ingress port: port 2's fixed peer.
        peer.sendto(calc_frame(0x2B, 2, 3), ("127.0.0.1", ready.udp_ports[2]))
        data, _ = peer.recvfrom(2048)
        assert CALC.unpack(data[14:28])[3] == 5
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "Traceback" not in err


def test_grpc_server_answers(calc_json: Path, tmp_path: Path) -> None:
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

    proc, line = switch_module(["--device-id", "3", str(calc_json), "--",
                                "--grpc-server-addr", "127.0.0.1:0", "--cpu-port", "64"],
                               tmp_path)
    try:
        assert "P4Runtime on 127.0.0.1:" in line, line
        port = int(line.rsplit(":", 1)[1])
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            reply = p4runtime_pb2_grpc.P4RuntimeStub(ch).Capabilities(
                p4runtime_pb2.CapabilitiesRequest(), timeout=10)
        assert reply.p4runtime_api_version
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0 and "Traceback" not in err


@pytest.mark.parametrize("args, code, message", [
    ([], 2, "a program JSON (or --no-p4) is required"),
    (["--no-p4", "x.json"], 2, "not both"),
    (["--no-p4", "-i", "1@"], 2, "bad interface spec"),
    (["--no-p4", "-i", "600@eth0"], 2, "outside 0..511"),
    (["--no-p4", "-i", "1@udp:127.0.0.1:nope=127.0.0.1:9"], 2, "is not a number"),
    (["--no-p4", "-i", "1@udp:127.0.0.1:1"], 2, "a UDP-tunnel port needs its peer"),
    (["--no-p4", "-i", "1@udp:127.0.0.1:1="], 2, "a UDP-tunnel port needs its peer"),
    (["--no-p4", "-i", "1@udp:127.0.0.1:1=127.0.0.1:x"], 2, "UDP peer"),
    (["--no-p4", "-i", "1@udp:127.0.0.1:1=127.0.0.1:9", "-i", "1@udp:127.0.0.1:2=127.0.0.1:9"],
     2, "twice"),
    (["--no-p4", "-L", "loud"], 2, "invalid choice"),
    (["--no-p4", "--", "--cpu-port", "511"], 2, "--cpu-port"),
    (["--no-p4", "--", "--grpc-server-addr", "nohost"], 2, "HOST:PORT"),
    (["--no-p4", "--", "--frobnicate"], 2, "unrecognized arguments"),
    (["missing.json"], 2, "not found"),
    (["--no-p4", "--pcap", "/nonexistent/dir"], 2, "does not exist"),
])
def test_cli_errors_are_one_line(args: list[str], code: int, message: str,
                                 tmp_path: Path) -> None:
    r = subprocess.run(switch_cmd(*args), capture_output=True, text=True, timeout=30,
                       cwd=tmp_path, env=checkout_env())
    assert r.returncode == code
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr


def test_bad_program_and_busy_port(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"__meta__": {"version": [9, 0]}}')
    env = checkout_env()
    r = subprocess.run(switch_cmd("--no-grpc", str(bad)), capture_output=True, text=True,
                       timeout=30, env=env)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "__meta__.version" in r.stderr
    busy = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    busy.bind(("127.0.0.1", 0))
    try:
        r = subprocess.run(switch_cmd("--no-grpc", "--no-p4", "-i",
                                      f"1@udp:127.0.0.1:{busy.getsockname()[1]}=127.0.0.1:9"),
                           capture_output=True, text=True, timeout=30, env=env)
    finally:
        busy.close()
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot bind" in r.stderr


def test_log_console_and_file(calc_json: Path, peer: socket.socket, tmp_path: Path) -> None:
    p1 = free_udp_ports(1)[0]
    log = tmp_path / "sw.log"
    me = peer.getsockname()[1]
    proc = start(["--no-grpc", "--log-console", "--log-file", str(log), "-L", "debug",
                  "-i", f"1@udp:127.0.0.1:{p1}=127.0.0.1:{me}", str(calc_json)], tmp_path)
    try:
        peer.sendto(calc_frame(0x2B, 1, 2), ("127.0.0.1", p1))
        peer.recvfrom(2048)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "Processing packet received on port 1" in out
    assert "Transmitting packet of size" in log.read_text()
