"""The netsum-switch daemon picks its port loop by itself: with the native backend buildable
and nothing asking for the Python loop, the C port loop (netsum/switch/native/io.py) takes over once
the pipeline module and the loop module are loaded (built in the background when not cached),
without a packet lost or answered wrongly across the switch-over; GetStats says which loop
runs and why, and the exit line counts every frame."""
from __future__ import annotations

import signal
import socket
import struct
import time
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether

from helpers import switch_module, switch_stats
from netsum.switch.native import build
from netsum.switch.native import io as nio

CALC = struct.Struct(">BIIIB")
pytestmark = pytest.mark.skipif(build.available() is not None,
                                reason=f"native backend not buildable: {build.available()}")


@pytest.mark.slow
def test_the_daemon_switches_to_the_c_loop_and_answers_throughout(
        p4c_fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(nio.ENV, raising=False)
    monkeypatch.delenv("NETSUM_NATIVE", raising=False)
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.1", 0))
    peer.settimeout(5)
    proc, line = switch_module(["-i", f"1@udp:127.0.0.1:0=127.0.0.1:{peer.getsockname()[1]}",
                                str(p4c_fixtures / "calc_state.json"), "--",
                                "--grpc-server-addr", "127.0.0.1:0"], tmp_path)
    sent = 0
    try:
        from netsum.rig import parse_ready_line
        ready = parse_ready_line(line)
        assert ready is not None and ready.grpc_addr is not None, line
        dest = ("127.0.0.1", ready.udp_ports[1])
        deadline = time.monotonic() + 120          # a cold cache compiles both modules
        seen = []
        while True:
            for a in range(20):                   # calc_state: a + b comes back on port 1
                b = sent
                peer.sendto(bytes(Ether(dst="02:00:00:00:00:0b", src="02:00:00:00:00:0a",
                                        type=0x1234)) + CALC.pack(0x2B, a, b, 0, 0), dest)
                data, _ = peer.recvfrom(2048)
                assert CALC.unpack(data[14:28])[3] == a + b
                sent += 1
            reply = switch_stats(ready.grpc_addr)
            seen.append((reply.get("native"), reply.get("io_loop")))
            if reply.get("io_loop") == nio.RUNNING:
                break
            assert time.monotonic() < deadline, seen
            time.sleep(0.2)
        assert reply["native"] == "native", reply
        assert reply["stats"]["rx_packets"] == sent and reply["stats"]["tx_packets"] == sent
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
        peer.close()
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert f"rx_packets={sent} " in out, out
