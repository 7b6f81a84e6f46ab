"""The daemon on Linux interfaces (AF_PACKET) over a veth pair this test creates and deletes."""
from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether

from helpers import switch_module

CALC = struct.Struct(">BIIIB")
PACKET_OUTGOING = 4


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@contextlib.contextmanager
def switch_on_veth(prefix: str, port: int, program: Path) -> Iterator[str]:
    """A veth pair made here (deleted after, whatever happens) with the daemon on one end as
    `port` running `program`; yields the other end.  The daemon must exit 0 on SIGTERM."""
    tag = f"{os.getpid() % 100000}"
    sw_if, host_if = f"{prefix}{tag}a", f"{prefix}{tag}b"
    ip("link", "add", sw_if, "type", "veth", "peer", "name", host_if)
    proc = None
    try:
        for i in (sw_if, host_if):
            ip("link", "set", i, "up")
        proc, _ = switch_module(["--no-grpc", "-i", f"{port}@{sw_if}", str(program)])
        yield host_if
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=10)
            assert proc.returncode == 0, err
        subprocess.run(["ip", "link", "del", sw_if], capture_output=True, timeout=10)


@pytest.mark.privileged
def test_calc_over_veth(privileged: None, p4c_fixtures: Path) -> None:
    with switch_on_veth("nsw", 1, p4c_fixtures / "calc_state.json") as host_if:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        s.bind((host_if, 0))
        frame = bytes(Ether(dst="02:00:00:00:00:0b", src="02:00:00:00:00:0a",
                            type=0x1234)) + CALC.pack(0x2B, 20, 22, 0, 0)
        s.send(frame)
        deadline = time.monotonic() + 5
        result = None
        while time.monotonic() < deadline and result is None:
            r, _, _ = select.select([s], [], [], 0.5)
            if not r:
                continue
            data, addr = s.recvfrom(4096)
            if addr[2] != PACKET_OUTGOING and len(data) >= 28 and data[12:14] == b"\x12\x34":
                result = CALC.unpack(data[14:28])[3]
        s.close()
        assert result == 42


@pytest.mark.privileged
def test_vlan_tag_survives_af_packet(privileged: None) -> None:
    """The kernel moves a received 802.1Q tag into packet metadata; the port layer must put it
    back.  router.json sends non-IPv4 frames to port 0 unchanged: bind port 0 to the veth and
    check the reflected frame still carries its tag."""
    from scapy.layers.l2 import Dot1Q

    router = Path(__file__).resolve().parents[1] / "switch_json" / "router.json"
    with switch_on_veth("nsv", 0, router) as host_if:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        s.bind((host_if, 0))
        s.setsockopt(263, 8, 1)                                  # PACKET_AUXDATA
        frame = bytes(Ether(dst="02:00:00:00:00:0b", src="02:00:00:00:00:0c") /
                      Dot1Q(vlan=77, type=0x88B5) / (b"v" * 50))
        s.send(frame)
        deadline = time.monotonic() + 5
        seen = False
        while time.monotonic() < deadline and not seen:
            r, _, _ = select.select([s], [], [], 0.5)
            if not r:
                continue
            data, anc, _f, addr = s.recvmsg(4096, 64)
            if addr[2] == PACKET_OUTGOING:
                continue
            if data == frame:
                seen = True                  # tag delivered inline
            # this tap may strip the tag too: then it is in the auxdata
            for level, kind, cdata in anc:
                if level == 263 and kind == 8:
                    status, _l, _s, _m, _n, tci, _tpid = struct.unpack_from("=IIIHHHH", cdata)
                    if status & 0x10 and tci & 0xFFF == 77 and data.endswith(b"v" * 50):
                        seen = True
        s.close()
        assert seen
