"""netsum.p4 (protocol v2) on the embedded switch: what claims to come from the aggregation
service but did not come through aggregation is dropped and counted per ingress port, never
forwarded to a worker as plain IPv4 (issue 25 point 1).  The red team's forged RESULTs went to
another UDP port, or behind IPv4 options; both were forwarded by v1 and accepted by workers.

Each case is a hand-built frame from a host on port 9 (in no job) addressed to worker 0, whose
MAC the L2 table forwards to port 1; ordinary traffic around the cases still flows unchanged.
"""
from __future__ import annotations

import struct

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4helpers import (SERVICE_IP, SERVICE_MAC, Host, NetsumSwitch, mac_int, netsum_config,
                       netsum_frame, parse_frame, worker_host)
from netsum.wire import K_DEFAULT, UDP_PORT, MsgType
from netsum.workers import wire

JOB = 8
ROGUE_PORT = 9
PORT_COUNTERS = ("drop_spoofed_src", "drop_irregular", "drop_unaggregated")


def make_switch() -> tuple[NetsumSwitch, list[Host]]:
    from netsum.switch.entries import Exact

    sw = NetsumSwitch(netsum_config())
    hosts = [worker_host(0), worker_host(1)]
    sw.add_job(JOB, hosts, num_slots=8)
    sw.add_service(SERVICE_IP)
    for h in hosts:
        sw.insert("NetsumIngress.dmac", [Exact(mac_int(h.mac))], "NetsumIngress.forward",
                  [h.port])
    return sw, hosts


def dropped(sw: NetsumSwitch, port: int = ROGUE_PORT) -> dict[str, int]:
    return {c: sw.counter(c, port) for c in PORT_COUNTERS if sw.counter(c, port)}


def forged_result(to: Host, *, src_ip: str = "10.0.0.200", sport: int = UDP_PORT,
                  dport: int | None = None, options: bytes = b"", flags: str = "",
                  frag: int = 0) -> bytes:
    """A RESULT of JOB for `to`'s slot 0 round 0 with values 2^30 each (what the red team sent,
    a sum no member computed), addressed to `to` as the switch addresses results."""
    payload = wire.pack(msg_type=MsgType.RESULT, job_id=JOB, count=2, exp=130) + \
        struct.pack(f"!{K_DEFAULT}i", *([1 << 30] * K_DEFAULT))
    return bytes(Ether(src=SERVICE_MAC, dst=to.mac)
                 / IP(src=src_ip, dst=to.ip, options=options, flags=flags, frag=frag)
                 / UDP(sport=sport, dport=to.udp_port if dport is None else dport) / payload)


def test_a_forged_result_to_another_udp_port_is_dropped() -> None:
    """From the netsum port to the worker's own port (or to port 9): only a switch sends that,
    and this one did not aggregate it."""
    sw, hosts = make_switch()
    for dport in (hosts[0].udp_port, 9):
        assert sw.send(ROGUE_PORT, forged_result(hosts[0], dport=dport)) == []
    assert dropped(sw) == {"drop_unaggregated": 2}


@pytest.mark.parametrize("options", [b"\x01\x01\x01\x01",              # IHL 6 (4 NOPs)
                                     b"\x01" * 40])                    # IHL 15, the most
@pytest.mark.parametrize("sport, dport", [(UDP_PORT, None), (40000, UDP_PORT)])
def test_udp_behind_ip_options_to_or_from_the_netsum_port_is_dropped(
        options: bytes, sport: int, dport: int | None) -> None:
    sw, hosts = make_switch()
    frame = forged_result(hosts[0], options=options, sport=sport, dport=dport)
    assert frame[14] & 0x0F == 5 + len(options) // 4
    assert sw.send(ROGUE_PORT, frame) == []
    assert dropped(sw) == {"drop_irregular": 1}


def test_ip_options_on_other_traffic_are_forwarded_untouched() -> None:
    sw, hosts = make_switch()
    frame = bytes(Ether(src="02:00:00:00:00:99", dst=hosts[0].mac)
                  / IP(src="10.0.0.99", dst=hosts[0].ip, options=b"\x01" * 8)
                  / UDP(sport=5000, dport=5001) / (b"payload" * 10))
    assert sw.send(ROGUE_PORT, frame) == [(hosts[0].port, frame)]
    assert dropped(sw) == {}


def test_fragments_with_netsum_ports_are_dropped_later_fragments_pass() -> None:
    """A first fragment (MF set, offset 0) shows its UDP ports: dropped when one is the
    netsum port.  A later fragment has no ports to read and is forwarded; alone it is no
    datagram (a worker's kernel reassembles nothing from it, frame mode refuses fragments)."""
    sw, hosts = make_switch()
    first = forged_result(hosts[0], flags="MF")
    assert sw.send(ROGUE_PORT, first) == []
    later = forged_result(hosts[0], frag=100)
    assert sw.send(ROGUE_PORT, later) == [(hosts[0].port, later)]
    other_first = bytes(Ether(src="02:00:00:00:00:99", dst=hosts[0].mac)
                        / IP(src="10.0.0.99", dst=hosts[0].ip, flags="MF")
                        / UDP(sport=5000, dport=5001) / (b"x" * 64))
    assert sw.send(ROGUE_PORT, other_first) == [(hosts[0].port, other_first)]
    assert dropped(sw) == {"drop_irregular": 1}


def test_the_service_address_as_a_source_from_outside_is_dropped() -> None:
    """Workers trust their service address: no frame from outside may carry it, whatever its
    ports (a plain UDP datagram here, or anything else IPv4)."""
    sw, hosts = make_switch()
    for frame in (forged_result(hosts[0], src_ip=SERVICE_IP, sport=5000),
                  bytes(Ether(src=SERVICE_MAC, dst=hosts[0].mac) / IP(src=SERVICE_IP,
                                                                      dst=hosts[0].ip) / b"x")):
        assert sw.send(ROGUE_PORT, frame) == []
    assert dropped(sw) == {"drop_spoofed_src": 2}
    # also from a member's own port: a member forging its switch is dropped as well
    assert sw.send(hosts[1].port, forged_result(hosts[0], src_ip=SERVICE_IP)) == []
    assert dropped(sw, hosts[1].port) == {"drop_spoofed_src": 1}


def test_plain_forgery_to_the_netsum_port_is_not_a_result() -> None:
    """A RESULT sent to the netsum port itself is parsed and refused as v1 did (bad type)."""
    sw, hosts = make_switch()
    assert sw.send(ROGUE_PORT, forged_result(hosts[0], dport=UDP_PORT)) == []
    assert sw.counter("drop_bad_type", JOB) == 1 and dropped(sw) == {}


def test_ordinary_udp_and_members_data_still_flow() -> None:
    sw, hosts = make_switch()
    plain = bytes(Ether(src=hosts[1].mac, dst=hosts[0].mac) / IP(src=hosts[1].ip, dst=hosts[0].ip)
                  / UDP(sport=5000, dport=5001) / b"hello")
    assert sw.send(hosts[1].port, plain) == [(hosts[0].port, plain)]
    for h in hosts:
        out = sw.send(h.port, netsum_frame(h, job_id=JOB, slot=0, values=[1] * K_DEFAULT))
    assert sorted(p for p, _ in out) == [1, 2]
    assert {parse_frame(f).values for _, f in out} == {(2,) * K_DEFAULT}
    assert all(dropped(sw, p) == {} for p in (1, 2, ROGUE_PORT))


def test_a_leaf_takes_its_parents_address_from_the_uplink_only() -> None:
    """A leaf's service_src: its own address (dropped from anywhere) and its parent's,
    accepted on the uplink (a RESULT from the root goes on to be checked as ever) and dropped
    on a worker's port."""
    up_port = 10
    root = Host(up_port, "02:00:00:00:ff:fe", "10.255.0.254", UDP_PORT)
    leaf = Host(1, SERVICE_MAC, SERVICE_IP, UDP_PORT)
    sw = NetsumSwitch(netsum_config())
    hosts = [worker_host(0), worker_host(1)]
    sw.add_leaf_job(JOB, hosts, leaf=leaf, up=root, up_port=up_port)
    sw.add_service(SERVICE_IP)
    sw.add_service(root.ip, parent_port=up_port)
    result = netsum_frame(root, job_id=JOB, slot=0, values=[3] * K_DEFAULT,
                          msg_type=MsgType.RESULT, count=2, dst_mac=leaf.mac, dst_ip=leaf.ip)
    assert sw.send(hosts[0].port, result) == []
    assert dropped(sw, hosts[0].port) == {"drop_spoofed_src": 1}
    # from the uplink: not spoofed; the leaf holds no round for it, so it is stale
    assert sw.send(up_port, result) == []
    assert dropped(sw, up_port) == {} and sw.counter("drop_stale", JOB) == 1
