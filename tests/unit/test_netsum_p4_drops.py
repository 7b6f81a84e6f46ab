"""netsum.p4 on the embedded switch: what is dropped, why, and how it is counted; the drop
simulator's rate; ordinary L2/ARP traffic around the aggregation service."""
from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from p4helpers import (SERVICE_IP, SERVICE_MAC, NetsumSwitch, mac_int, netsum_config, one_reply,
                       netsum_frame, worker_host)
from netsum.wire import HEADER_BYTES, K_DEFAULT, MsgType, Reason

JOB = 5
VALUES = [1] * K_DEFAULT
DROP_COUNTERS = ("drop_non_member", "drop_bad_slot", "drop_unknown_job", "drop_bad_type",
                 "drop_malformed", "drop_stale", "drop_result_port")


def make_switch(**job_kw: int) -> NetsumSwitch:
    sw = NetsumSwitch(netsum_config())
    sw.add_job(JOB, [worker_host(0), worker_host(1)], **job_kw)
    return sw


def drops(sw: NetsumSwitch, index: int) -> dict[str, int]:
    return {name: sw.counter(name, index) for name in DROP_COUNTERS}


def only(counter: str, value: int = 1) -> dict[str, int]:
    return {name: (value if name == counter else 0) for name in DROP_COUNTERS}


def test_non_member_is_dropped_and_counted() -> None:
    sw = make_switch()
    stranger = worker_host(9)
    assert sw.send(7, netsum_frame(stranger, job_id=JOB, slot=0, values=VALUES)) == []
    assert drops(sw, JOB) == only("drop_non_member")
    assert sw.counter("pkts_in", JOB) == 1
    assert sw.register("bitmap", 0) == 0 and sw.register("val000", 0) == 0


ETH_IP_UDP = 14 + 20 + 8


@pytest.mark.parametrize("length, index", [
    (ETH_IP_UDP, 0),                          # UDP to the netsum port, no header at all
    (ETH_IP_UDP + 5, 0),                      # header cut: job id unknown -> index 0
    (ETH_IP_UDP + HEADER_BYTES, JOB),         # header but no values
    (ETH_IP_UDP + HEADER_BYTES + 4 * K_DEFAULT - 1, JOB),   # one byte short
])
def test_truncated_packets_are_malformed(length: int, index: int) -> None:
    sw = make_switch()
    frame = netsum_frame(worker_host(0), job_id=JOB, slot=0, values=VALUES, truncate=length)
    assert sw.send(1, frame) == []
    assert drops(sw, index) == only("drop_malformed")
    assert sw.counter("pkts_in", index) == 0
    assert sw.register("bitmap", 0) == 0


@pytest.mark.parametrize("job_id, index", [(6, 6), (255, 255), (256, 0), (65535, 0)])
def test_unknown_job(job_id: int, index: int) -> None:
    sw = make_switch()
    assert sw.send(1, netsum_frame(worker_host(0), job_id=job_id, slot=0, values=VALUES)) == []
    assert drops(sw, index) == only("drop_unknown_job")


@pytest.mark.parametrize("slot_base, num_slots, slot", [
    (0, 16, 16),            # slot == num_slots
    (0, 16, 0xFFFF),        # largest slot the header can carry
    (4090, 100, 6),         # inside the job's range but past the register pool (4096 slots)
])
def test_bad_slot_never_touches_registers(slot_base: int, num_slots: int, slot: int) -> None:
    """A member's slot outside its job's range: refused and counted, its sender alone gets a
    header-only REJECT(SLOT) whose slot field is the job's number of slots."""
    sw = make_switch(slot_base=slot_base, num_slots=num_slots)
    out = sw.send(1, netsum_frame(worker_host(0), job_id=JOB, slot=slot, values=VALUES))
    p = one_reply(out, worker_host(0))
    assert (p.header["msg_type"], p.header["reason"], p.header["slot"]) == \
        (MsgType.REJECT, Reason.SLOT, num_slots)
    assert p.values == () and (p.ip_len, p.udp_len) == (20 + 8 + HEADER_BYTES, 8 + HEADER_BYTES)
    assert drops(sw, JOB) == only("drop_bad_slot")
    assert all(sw.register("bitmap", i) == 0 for i in range(2 * 4096))


def test_last_slot_of_the_pool_is_usable() -> None:
    sw = make_switch(slot_base=4090, num_slots=6)
    sw.send(1, netsum_frame(worker_host(0), job_id=JOB, slot=5, round=1, values=VALUES))
    out = sw.send(2, netsum_frame(worker_host(1), job_id=JOB, slot=5, round=1, values=VALUES))
    assert len(out) == 2
    assert sw.register("contributions", 2 * 4096 - 1) == 2


@pytest.mark.parametrize("msg_type", [0, MsgType.RESULT, 3, 0xFF])
def test_bad_message_type_at_a_root(msg_type: int) -> None:
    sw = make_switch()
    frame = netsum_frame(worker_host(0), job_id=JOB, slot=0, values=VALUES, msg_type=msg_type)
    assert sw.send(1, frame) == []
    assert drops(sw, JOB) == only("drop_bad_type")


def test_counters_count_per_job_packets_and_bytes() -> None:
    sw = make_switch()
    frames = [netsum_frame(worker_host(i), job_id=JOB, slot=0, values=VALUES) for i in (0, 1)]
    for i, f in enumerate(frames):
        sw.send(i + 1, f)
    sw.send(1, frames[0])          # duplicate after completion: a unicast result
    assert sw.counter("pkts_in", JOB) == 3
    assert sw.pipeline.counters["NetsumIngress.pkts_in"].read(JOB).bytes == 3 * len(frames[0])
    assert sw.counter("retransmissions", JOB) == 1
    assert sw.counter("results_out", JOB) == 3
    assert drops(sw, JOB) == only("drop_malformed", 0)
    assert sw.counter("pkts_in", JOB + 1) == 0


# ---- drop simulator ----

def test_ingress_drop_simulator_rate() -> None:
    """10 % (threshold 6554/65536) on one ingress port: 10 % ± 2 % of 10k packets (6.7 sigma)."""
    sw = make_switch()
    sw.set_drop_rate(1, 6554)
    n = 10_000
    # packets of an unknown job: the cheapest path after the simulator, counted either way
    frame = netsum_frame(worker_host(0), job_id=77, slot=0, values=VALUES)
    for _ in range(n):
        sw.send(1, frame)
    dropped = sw.counter("sim_drops_in", 1)
    assert dropped + sw.counter("drop_unknown_job", 77) == n
    assert abs(dropped / n - 0.10) < 0.02, dropped
    # other ports are unaffected
    for _ in range(200):
        sw.send(2, frame)
    assert sw.counter("sim_drops_in", 2) == 0


def test_egress_drop_simulator_drops_result_copies() -> None:
    sw = make_switch()
    sw.set_drop_rate(2, 0xFFFF, egress=True)      # 65535/65536: practically always
    rounds = 50
    delivered = {1: 0, 2: 0}
    for r in range(rounds):
        sw.send(1, netsum_frame(worker_host(0), job_id=JOB, slot=0, round=r, values=VALUES))
        out = sw.send(2, netsum_frame(worker_host(1), job_id=JOB, slot=0, round=r,
                                      values=VALUES))
        for port, _ in out:
            delivered[port] += 1
    assert delivered[1] == rounds
    assert delivered[2] <= 1
    assert sw.counter("sim_drops_out", 2) == rounds - delivered[2]
    assert sw.counter("results_out", JOB) == rounds + delivered[2]


def test_drop_simulator_spares_ordinary_traffic() -> None:
    sw = make_switch()
    sw.set_drop_rate(1, 0xFFFF)
    sw.insert("NetsumIngress.dmac", [_exact(mac_int("02:00:00:00:00:02"))],
              "NetsumIngress.forward", [2])
    frame = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                  / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=53) / (b"x" * 20))
    for _ in range(20):
        assert sw.send(1, frame) == [(2, frame)]


# ---- ordinary traffic ----

def _exact(v: int):  # noqa: ANN202 - netsum.switch.entries.Exact, imported late like p4helpers does
    from netsum.switch.entries import Exact

    return Exact(v)


def test_l2_forward_and_flood_without_reflection() -> None:
    from netsum.switch.entries import Replica

    sw = make_switch()
    sw.pipeline.pre.mc_group_insert(1, [Replica(p, 0) for p in (1, 2, 3)])
    sw.insert("NetsumIngress.dmac", [_exact(mac_int("02:00:00:00:00:03"))],
              "NetsumIngress.forward", [3])
    known = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:03") / IP() / b"hi")
    assert sw.send(1, known) == [(3, known)]
    bcast = bytes(Ether(src="02:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff") / IP() / b"hi")
    assert sorted(sw.send(1, bcast)) == [(2, bcast), (3, bcast)]
    unknown = bytes(Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:99") / IP() / b"hi")
    assert sorted(sw.send(2, unknown)) == [(1, unknown), (3, unknown)]


def test_arp_responder_answers_for_the_service_address() -> None:
    from netsum.switch.entries import Replica

    sw = make_switch()
    sw.pipeline.pre.mc_group_insert(1, [Replica(p, 0) for p in (1, 2)])
    sw.insert("NetsumIngress.arp_responder", [_exact(0x0A0000FE)], "NetsumIngress.arp_reply",
              [mac_int(SERVICE_MAC)])
    req = bytes(Ether(src="02:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff")
                / ARP(op=1, hwsrc="02:00:00:00:00:01", psrc="10.0.0.1", pdst=SERVICE_IP))
    out = sw.send(1, req)
    assert len(out) == 1 and out[0][0] == 1
    reply = Ether(out[0][1])
    assert (reply.src, reply.dst) == (SERVICE_MAC, "02:00:00:00:00:01")
    assert (reply[ARP].op, reply[ARP].hwsrc, reply[ARP].psrc) == (2, SERVICE_MAC, SERVICE_IP)
    assert (reply[ARP].hwdst, reply[ARP].pdst) == ("02:00:00:00:00:01", "10.0.0.1")
    # a request for another address is flooded like any broadcast
    other = bytes(Ether(src="02:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff")
                  / ARP(op=1, hwsrc="02:00:00:00:00:01", psrc="10.0.0.1", pdst="10.0.0.2"))
    assert sw.send(1, other) == [(2, other)]
