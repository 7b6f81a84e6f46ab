"""The C port loop on Linux interfaces (AF_PACKET over veth pairs made and deleted here)
against the Python loop: the same frames out per port, the same counters.

Three veth pairs give the switch ports 0, 1 and 2 (router.json: IPv4 by LPM, anything else to
port 0).  Into port 1 go IPv4 frames (out on port 2), 802.1Q-tagged frames (the kernel moves
the tag into metadata; both loops must put it back, and they leave on port 0), cut frames and
one frame above the switch's 65535-byte maximum (oversize).  Each loop must skip the frames it
sent itself (the tap sees them as outgoing).
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from portloop import looped, sent_out
from netsum.switch.device import Device
from netsum.switch.entries import ActionCall, Lpm, TableEntry
from netsum.switch.native import build
from netsum.switch.pipeline import Pipeline

ROUTER_JSON = Path(__file__).resolve().parents[1] / "switch_json" / "router.json"
pytestmark = [pytest.mark.privileged,
              pytest.mark.skipif(build.available() is not None,
                                 reason=f"native backend not buildable: {build.available()}")]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@pytest.fixture
def veths(privileged: None) -> Iterator[dict[int, tuple[str, str]]]:
    tag = os.getpid() % 100000
    pairs = {n: (f"nio{tag}s{n}", f"nio{tag}h{n}") for n in (0, 1, 2)}
    try:
        for a, b in pairs.values():
            _ip("link", "add", a, "type", "veth", "peer", "name", b)
            for i in (a, b):
                # quiet links: no IPv6 neighbour/router traffic of the kernel's own
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{i}.disable_ipv6=1"],
                               capture_output=True, timeout=10)
                _ip("link", "set", i, "mtu", "65535")
                _ip("link", "set", i, "up")
        yield pairs
    finally:
        for a, _b in pairs.values():
            subprocess.run(["ip", "link", "del", a], capture_output=True, timeout=10)


def _run(io: str, veths: dict[int, tuple[str, str]]) -> tuple[dict[int, list[bytes]],
                                                             dict[str, int]]:
    dev = Device()
    dev.install(Pipeline(json.loads(ROUTER_JSON.read_text()), native=True))
    assert dev.pipeline is not None and dev.pipeline.native is not None
    dev.pipeline.tables["MyIngress.ipv4_lpm"].insert(TableEntry(
        (Lpm(0x0A000000, 8),), ActionCall("MyIngress.ipv4_forward", (0x0200000000AA, 2))))
    mac = bytes.fromhex("0200000000fe" "020000000002")
    ipv4 = mac + bytes.fromhex("0800" "4500002e00004000" "4011") + bytes(2) + \
        struct.pack(">II", 0x0A010002, 0x0A000005) + bytes(26)
    frames = []
    for n in range(40):
        frames.append(ipv4[:-1] + bytes([n]))
        frames.append(mac + struct.pack(">HH", 0x8100, 100 + n) + bytes.fromhex("88b5") +
                      bytes([n]) * 60)                              # tagged, not IPv4
        if n % 10 == 0:
            frames.append(ipv4[:20 + n // 10])                     # cut inside IPv4
    frames.append(ipv4 + bytes(65549 - len(ipv4)))                 # above MAX_FRAME
    with looped(dev, [], io, ifaces=veths) as lp:
        for f in frames:
            lp.burst([(1, f, False)])
        lp.burst([(1, f, False) for f in frames[:30]])             # one batch
        out = lp.finish(sent_out(dev))
    return out, dev.stats.as_dict()


def test_af_packet_ports_through_both_loops(veths: dict[int, tuple[str, str]]) -> None:
    c, py = _run("c", veths), _run("python", veths)
    assert c[0] == py[0]
    assert c[1] == py[1]
    assert c[1]["oversize"] == 1
    tagged = [f for f in c[0][0] if f[12:14] == b"\x81\x00"]
    assert len(tagged) >= 40 and tagged[0][14:16] == b"\x00\x64"   # VLAN 100 put back
    assert len(c[0][2]) >= 40
