"""The p4lang tutorials' flowcache exercise, its P4Runtime side, driven with the pip-installed
p4runtime-shell (which the exercise's controller also imports): packets of unknown flows
arrive as PacketIn, the controller installs a flow entry with idle_timeout_ns and returns the
packet as a PacketOut; once the flow is idle the switch sends an IdleTimeoutNotification
(read with p4runtime-shell's own IdleTimeoutNotification().sniff) and the controller deletes
the entry, after which the flow is punted again.  The exercise's controller needs the
tutorials' utils/p4runtime_lib, which is not a package, so the message sequence is reproduced
here with the shell's API on tests/p4programs/punt_cache.p4 (written for this test, compiled
by netsum-p4c).  Expected frames worked out by hand from the program.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from netsum import p4c as compiler
from netsum.switch.device import Device
from netsum.switch.p4rt import P4RuntimeServer

sh = pytest.importorskip("p4runtime_sh.shell")

ROOT = Path(__file__).resolve().parents[2]
CPU = 64
DEVICE_ID = 0
TTL_NS = 1_000_000_000


def ipv4_frame(src: int, dst: int, proto: int = 17, ttl: int = 64) -> bytes:
    eth = bytes.fromhex("0000000000aa" "0000000000bb" "0800")
    ip = bytes([0x45, 0, 0, 40, 0, 1, 0, 0, ttl, proto, 0, 0]) + src.to_bytes(4, "big") + \
        dst.to_bytes(4, "big")
    return eth + ip + b"p" * 20


def wait_for(sent: list[tuple[int, bytes]], n: int) -> None:
    deadline = time.monotonic() + 10
    while len(sent) < n and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.slow
def test_punted_flow_gets_an_entry_with_idle_timeout_and_loses_it_when_idle(
        tmp_path: Path) -> None:
    res = compiler.compile_file(ROOT / "tests" / "p4programs" / "punt_cache.p4")
    (tmp_path / "p.json").write_text(res.json_text())
    (tmp_path / "p.txtpb").write_text(res.p4info_text())
    dev = Device(device_id=DEVICE_ID, cpu_port=CPU)
    sent: list[tuple[int, bytes]] = []
    dev.transmit = lambda port, data: sent.append((port, data))
    srv = P4RuntimeServer(dev, "127.0.0.1:0").start()
    try:
        sh.setup(device_id=DEVICE_ID, grpc_addr=f"127.0.0.1:{srv.port}", election_id=(0, 1),
                 config=sh.FwdPipeConfig(str(tmp_path / "p.txtpb"), str(tmp_path / "p.json")),
                 verbose=False)
        try:
            packets = sh.PacketIn()
            idle = sh.IdleTimeoutNotification()
            a, b = 0x0A000101, 0x0A000202
            frame = ipv4_frame(a, b)
            # Unknown flow: punted with packet_in {ingress_port = 3}; nothing leaves.
            dev.receive(3, frame)
            (pin,) = list(packets.sniff(timeout=1.0))
            assert pin.packet.payload == frame
            assert [(m.metadata_id, m.value) for m in pin.packet.metadata] == \
                [(1, b"\x03"), (2, b"\x00")]
            assert sent == []
            # The controller's answer: the flow entry (with an idle timeout) and the packet
            # back out of port 2.
            te = sh.TableEntry("Ing.flow_cache")(action="Ing.cached")
            te.match["hdr.ipv4.protocol"] = "17"
            te.match["hdr.ipv4.src"] = "10.0.1.1"
            te.match["hdr.ipv4.dst"] = "10.0.2.2"
            te.action["port"] = "2"
            te.action["decrement_ttl"] = "1"
            te.action["dst_mac"] = "08:00:00:00:02:22"
            te.idle_timeout_ns = TTL_NS
            te.insert()
            sh.PacketOut(frame, egress_port="2").send()
            wait_for(sent, 1)
            assert sent == [(2, frame)]
            (read,) = list(sh.TableEntry("Ing.flow_cache").read())
            assert read.msg().idle_timeout_ns == TTL_NS
            # The flow now hits: dst MAC rewritten, TTL 64 -> 63, out of port 2, no PacketIn.
            dev.receive(3, frame)
            wait_for(sent, 2)
            expected = bytes.fromhex("080000000222") + frame[6:22] + bytes([63]) + frame[23:]
            assert sent[1] == (2, expected)
            assert list(packets.sniff(timeout=0.3)) == []
            # Idle for its TTL: one notification naming the entry; the controller deletes it.
            notes = list(idle.sniff(timeout=TTL_NS / 1e9 + 5))
            assert len(notes) >= 1
            entries = [e for n in notes for e in n.idle_timeout_notification.table_entry]
            assert len(entries) == 1
            (e,) = entries
            assert e.table_id == res.p4info.tables[0].preamble.id
            assert [m.exact.value for m in e.match] == \
                [b"\x11", a.to_bytes(4, "big"), b.to_bytes(4, "big")]
            assert e.idle_timeout_ns == TTL_NS
            gone = sh.TableEntry("Ing.flow_cache")
            gone.match["hdr.ipv4.protocol"] = "17"
            gone.match["hdr.ipv4.src"] = "10.0.1.1"
            gone.match["hdr.ipv4.dst"] = "10.0.2.2"
            gone.delete()
            # Punted again.
            dev.receive(3, frame)
            assert len(list(packets.sniff(timeout=1.0))) == 1
            assert len(sent) == 2
        finally:
            sh.teardown()
    finally:
        srv.stop(None)
