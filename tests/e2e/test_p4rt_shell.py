"""The embedded switch driven by p4runtime-shell exactly as a user drives simple_switch_grpc:
setup with a pipeline config, table entries, default actions, multicast groups, counters —
and the packets that prove the writes reached the data plane.

p4runtime-shell keeps its client in module globals: every test tears it down in a `finally`.
Batches are never sent through it (its 0.0.6 error iterator loops on partly failed batches).
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.l2 import Dot1Q, Ether

from helpers import embedded_server
from netsum.switch.device import Device
from netsum.switch.p4rt import P4RuntimeServer

sh = pytest.importorskip("p4runtime_sh.shell")
from p4runtime_sh.p4runtime import P4RuntimeWriteException  # noqa: E402

DEVICE_ID = 0


@pytest.fixture
def server() -> Iterator[tuple[Device, P4RuntimeServer]]:
    with embedded_server(DEVICE_ID) as made:
        yield made


def shell_for(srv: P4RuntimeServer, fixtures: Path, program: str) -> Any:
    sh.setup(device_id=DEVICE_ID, grpc_addr=f"127.0.0.1:{srv.port}", election_id=(0, 1),
             config=sh.FwdPipeConfig(str(fixtures / f"{program}.p4info.txtpb"),
                                     str(fixtures / f"{program}.json")),
             verbose=False)
    return sh


@pytest.fixture
def l2(server: tuple[Device, P4RuntimeServer], p4c_fixtures: Path) -> Iterator[Device]:
    dev, srv = server
    shell_for(srv, p4c_fixtures, "l2_mcast")
    try:
        yield dev
    finally:
        sh.teardown()


def frame(dst: str, src: str = "00:00:00:00:00:aa", vid: int | None = None) -> bytes:
    pkt = Ether(dst=dst, src=src)
    if vid is not None:
        pkt = Ether(dst=dst, src=src, type=0x8100) / Dot1Q(vlan=vid)
    return bytes(pkt / (b"x" * 46))


def test_exact_entry_insert_read_forward_delete(l2: Device) -> None:
    te = sh.TableEntry("L2Ingress.dmac")(action="L2Ingress.forward")
    te.match["hdr.eth.dst"] = "00:00:00:00:00:01"
    te.action["port"] = "3"
    te.insert()

    read = list(sh.TableEntry("L2Ingress.dmac").read())
    assert len(read) == 1
    msg = read[0].msg()
    assert msg.match[0].exact.value == b"\x01"            # canonical: leading zeros stripped
    assert msg.action.action.params[0].value == b"\x03"
    out = l2.process(1, frame("00:00:00:00:00:01"))
    assert [port for port, _ in out] == [3]

    te.delete()
    assert list(sh.TableEntry("L2Ingress.dmac").read()) == []


def test_ternary_and_range_entry_with_priority(l2: Device) -> None:
    te = sh.TableEntry("L2Ingress.acl")(action="L2Ingress.deny")
    te.match["hdr.eth.src"] = "00:00:00:00:00:aa&&&ff:ff:ff:ff:ff:ff"
    te.match["sm.ingress_port"] = "1..4"
    te.priority = 10
    te.insert()
    (entry,) = list(sh.TableEntry("L2Ingress.acl").read())
    msg = entry.msg()
    assert msg.priority == 10
    # The don't-care vlan field is omitted, the others come back canonical.
    assert sorted(m.field_id for m in msg.match) == [1, 3]
    fwd = sh.TableEntry("L2Ingress.dmac")(action="L2Ingress.forward")
    fwd.match["hdr.eth.dst"] = "00:00:00:00:00:02"
    fwd.action["port"] = "5"
    fwd.insert()
    assert l2.process(2, frame("00:00:00:00:00:02")) == []          # denied: port 2 in 1..4
    assert [p for p, _ in l2.process(7, frame("00:00:00:00:00:02"))] == [5]


def test_default_action_modify_and_read(l2: Device) -> None:
    te = sh.TableEntry("L2Ingress.dmac")(action="L2Ingress.forward", is_default=True)
    te.action["port"] = "9"
    te.modify()
    entry = sh.TableEntry("L2Ingress.dmac")
    entry.is_default = True
    (got,) = list(entry.read())
    assert got.msg().is_default_action
    assert got.msg().action.action.params[0].value == b"\x09"
    # Plain reads do not include the default entry.
    assert list(sh.TableEntry("L2Ingress.dmac").read()) == []


def test_multicast_group_replicates_with_egress_rid(l2: Device) -> None:
    group = sh.MulticastGroupEntry(1).add(2, 1).add(3, 2)
    group.insert()
    (got,) = list(sh.MulticastGroupEntry(1).read())
    assert [(r.egress_port, r.instance) for r in got.msg().multicast_group_entry.replicas] == [(2, 1), (3, 2)]
    # Give replica rid 2 on port 3 a VLAN tag in egress.
    rw = sh.TableEntry("L2Egress.replica_rewrite")(action="L2Egress.set_vlan")
    rw.match["sm.egress_rid"] = "2"
    rw.match["sm.egress_port"] = "3"
    rw.action["vid"] = "42"
    rw.insert()
    out = dict(l2.process(1, frame("00:00:00:00:00:77")))            # dmac miss -> group 1
    assert sorted(out) == [2, 3]
    assert Ether(out[3])[Dot1Q].vlan == 42 and Dot1Q not in Ether(out[2])
    sh.MulticastGroupEntry(1).delete()
    assert list(sh.MulticastGroupEntry(0).read()) == []


def test_direct_counter_counts_hits(l2: Device) -> None:
    te = sh.TableEntry("L2Ingress.dmac")(action="L2Ingress.forward")
    te.match["hdr.eth.dst"] = "00:00:00:00:00:05"
    te.action["port"] = "1"
    te.insert()
    pkt = frame("00:00:00:00:00:05")
    for _ in range(3):
        l2.process(2, pkt)
    dc = sh.DirectCounterEntry("L2Ingress.dmac_hits")
    dc.table_entry.match["hdr.eth.dst"] = "00:00:00:00:00:05"
    (got,) = list(dc.read())
    assert got.msg().data.packet_count == 3
    assert got.msg().data.byte_count == 3 * len(pkt)


def test_duplicate_insert_reports_already_exists(l2: Device) -> None:
    te = sh.TableEntry("L2Ingress.dmac")(action="NoAction")
    te.match["hdr.eth.dst"] = "00:00:00:00:00:01"
    te.insert()
    with pytest.raises(P4RuntimeWriteException) as err:
        te.insert()
    assert "ALREADY_EXISTS" in str(err.value)


def test_indirect_counter_and_const_table(server: tuple[Device, P4RuntimeServer],
                                          p4c_fixtures: Path) -> None:
    dev, srv = server
    shell_for(srv, p4c_fixtures, "calc_state")
    try:
        # The const entries are readable (p4runtime-shell drops `is_const`; test_p4rt_raw checks it).
        entries = [e.msg() for e in sh.TableEntry("CalcIngress.calc_ops").read()]
        assert sorted(e.match[0].exact.value for e in entries) == [b"+", b"-", b"/"]
        cells = list(sh.CounterEntry("CalcIngress.per_op").read())
        assert len(cells) == 16
        assert all(c.msg().data.packet_count == 0 for c in cells)
        one = sh.CounterEntry("CalcIngress.per_op")
        one.index = 3
        assert [c.msg().index.index for c in one.read()] == [3]
        te = sh.TableEntry("CalcIngress.calc_ops")(action="CalcIngress.op_add")
        te.match["hdr.calc.op"] = "0x01"
        with pytest.raises(P4RuntimeWriteException) as err:
            te.insert()
        assert "PERMISSION_DENIED" in str(err.value)
    finally:
        sh.teardown()


# p4c's rendering of two @controller_header headers (9-bit port + 7-bit pad each).
PACKET_HEADERS = """
controller_packet_metadata { preamble { id: 67121543 name: "packet_out" alias: "packet_out" }
  metadata { id: 1 name: "egress_port" bitwidth: 9 } metadata { id: 2 name: "_pad" bitwidth: 7 } }
controller_packet_metadata { preamble { id: 67146229 name: "packet_in" alias: "packet_in" }
  metadata { id: 1 name: "ingress_port" bitwidth: 9 } metadata { id: 2 name: "_pad" bitwidth: 7 } }
"""


def test_packet_out_and_packet_in_through_the_shell(p4c_fixtures: Path, tmp_path: Path) -> None:
    cpu = 64
    dev = Device(device_id=DEVICE_ID, cpu_port=cpu)
    sent: list[tuple[int, bytes]] = []
    dev.transmit = lambda port, data: sent.append((port, data))
    srv = P4RuntimeServer(dev, "127.0.0.1:0").start()
    p4info = tmp_path / "l2_cpu.p4info.txtpb"
    p4info.write_text((p4c_fixtures / "l2_mcast.p4info.txtpb").read_text() + PACKET_HEADERS)
    try:
        sh.setup(device_id=DEVICE_ID, grpc_addr=f"127.0.0.1:{srv.port}", election_id=(0, 1),
                 config=sh.FwdPipeConfig(str(p4info), str(p4c_fixtures / "l2_mcast.json")),
                 verbose=False)
        try:
            # Frames to dst ...:42 go to the CPU; the PacketOut's 2 header bytes + payload
            # start with 0x0100 0000 0007, which dmac forwards to port 6.
            to_cpu = sh.TableEntry("L2Ingress.dmac")(action="L2Ingress.forward")
            to_cpu.match["hdr.eth.dst"] = "00:00:00:00:00:42"
            to_cpu.action["port"] = str(cpu)
            to_cpu.insert()
            out = sh.TableEntry("L2Ingress.dmac")(action="L2Ingress.forward")
            out.match["hdr.eth.dst"] = "01:00:00:00:00:07"
            out.action["port"] = "6"
            out.insert()
            sniffer = sh.PacketIn()
            payload = bytes.fromhex("00000007") + b"\xee" * 60
            sh.PacketOut(payload, egress_port="2").send()        # 2 << 7 = 0x0100
            frame = bytes.fromhex("000000000042000000000001") + b"\x08\x00" + b"q" * 50
            dev.receive(3, frame)
            got = list(sniffer.sniff(timeout=1.0))
            assert len(got) == 1
            assert got[0].packet.payload == frame[2:]
            deadline = time.monotonic() + 2
            while not sent and time.monotonic() < deadline:
                time.sleep(0.01)
            assert sent == [(6, b"\x01\x00" + payload)]
        finally:
            sh.teardown()
    finally:
        srv.stop(None)
