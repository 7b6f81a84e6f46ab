"""Test helpers for netsum frames and for driving netsum.p4 on the embedded switch.

Owns: building and dissecting netsum frames with scapy around the netsum header, which the
project's one header codec packs and unpacks (netsum.workers.wire: `pack`, `unpack_fields`).
That codec is pinned to docs/protocol.md by hand-derived bytes in tests/unit/test_wire.py,
and p4/netsum.p4's header declaration to the same field table by tests/unit/test_protocol.py,
so a test built on these helpers checks the P4 program against the protocol; and `NetsumSwitch`, a thin wrapper over `netsum.switch.device.Device` that installs netsum.p4's table
entries by their P4Info names (p4/README.md).
"""
from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netsum.wire import (DEST_ALL, HEADER_BYTES, K_DEFAULT, K_SUPPORTED, UDP_PORT, Flags,
                         MsgType)
from netsum.wire import klog2 as log2_k
from netsum.workers import wire

__all__ = [
    "netsum_config", "SERVICE_MAC", "SERVICE_IP", "Host", "worker_host",
    "netsum_frame", "Parsed", "parse_frame", "ipv4_checksum_ok", "NetsumSwitch", "mac_int",
    "ip_int", "wrap32", "vec_sum", "INT32_MIN", "INT32_MAX", "DEFAULT_LENGTH", "data_fields",
    "one_reply",
]

SERVICE_MAC = "02:00:00:00:00:fe"
SERVICE_IP = "10.0.0.254"

#: The tensor length a frame says when a test does not give one (the same for every member,
#: so the switch's length check passes unless a test sets another).
DEFAULT_LENGTH = 1 << 20

# job id -> the member count the last NetsumSwitch of this process installed it with: what a
# correctly configured worker of the job says in `workers` (netsum_frame's default).  Test
# plumbing: a test that wants another count passes `workers=` explicitly.
_JOB_WORKERS: dict[int, int] = {}


def data_fields(job_id: int, k: int = K_DEFAULT, **over: int) -> dict[str, int]:
    """The v2 header fields netsum_frame writes into a DATA frame of `job_id` with K values
    by default (a result or STATUS copies them): workers, dest, reason, klog2, length."""
    out = {"workers": _JOB_WORKERS.get(job_id, 0), "dest": DEST_ALL, "reason": 0,
           "klog2": log2_k(k) if k in K_SUPPORTED else 0, "length": DEFAULT_LENGTH}
    out.update(over)
    return out


@functools.cache
def netsum_config(k: int = K_DEFAULT) -> bytes:
    """netsum.p4's BMv2 JSON for K=k, built by netsum.build if stale; read once per process."""
    from netsum.build import ensure_built

    json_path, _ = ensure_built(k)
    return json_path.read_bytes()


INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def crc16_arc(data: bytes) -> int:
    """bmv2's crc16 (CRC-16/ARC: poly 0x8005 reflected, init 0, no final xor), written from
    the algorithm's definition as the reference tests compare the switch with."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def wrap32(x: int) -> int:
    """x as bit<32> addition leaves it, read as two's complement."""
    return ((x - INT32_MIN) % (1 << 32)) + INT32_MIN


def vec_sum(vectors: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """Lane-wise int32 (wrap-around) sum: what one aggregated round must return."""
    return tuple(wrap32(sum(col)) for col in zip(*vectors))


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def ip_int(ip: str) -> int:
    a, b, c, d = (int(x) for x in ip.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


@dataclass(frozen=True, slots=True)
class Host:
    """A worker (or a leaf switch seen from its parent): where it sits and how it is addressed."""
    port: int
    mac: str
    ip: str
    udp_port: int


def worker_host(i: int, port: int | None = None) -> Host:
    """Worker i (0-based): switch port i+1 unless given, MAC/IP derived from i."""
    return Host(port if port is not None else i + 1, f"02:00:00:00:{(i >> 8) & 0xFF:02x}:{i & 0xFF:02x}",
                f"10.0.{i >> 8}.{(i & 0xFF) + 1}", 40000 + i)


def netsum_frame(src: Host, *, job_id: int, slot: int, round: int = 0, values: Sequence[int],
                 exp: int = 0, msg_type: int = MsgType.DATA, flags: int = 0, count: int = 0,
                 offset: int = 0, dst_mac: str = SERVICE_MAC, dst_ip: str = SERVICE_IP,
                 dst_port: int = UDP_PORT, truncate: int | None = None,
                 src_mac: str | None = None, src_ip: str | None = None,
                 workers: int | None = None, dest: int = DEST_ALL, reason: int = 0,
                 klog2: int | None = None, length: int = DEFAULT_LENGTH) -> bytes:
    """A whole Ethernet frame from `src` (or, spoofing, from `src_mac`/`src_ip`); values are
    int32 (two's complement, big-endian).  The v2 fields default to what a correctly
    configured member sends (`data_fields`): the job's member count, log2 of len(values),
    DEFAULT_LENGTH, every rank as destination."""
    v2 = data_fields(job_id, len(values), dest=dest, reason=reason, length=length)
    if workers is not None:
        v2["workers"] = workers
    if klog2 is not None:
        v2["klog2"] = klog2
    payload = wire.pack(msg_type=msg_type, flags=flags, job_id=job_id, round=round, slot=slot,
                          exp=exp, count=count, offset=offset, **v2)
    payload += struct.pack(f"!{len(values)}i", *values)
    frame = bytes(Ether(src=src_mac or src.mac, dst=dst_mac)
                  / IP(src=src_ip or src.ip, dst=dst_ip, id=1)
                  / UDP(sport=src.udp_port, dport=dst_port) / payload)
    return frame if truncate is None else frame[:truncate]


@dataclass(frozen=True, slots=True)
class Parsed:
    eth_src: str
    eth_dst: str
    ip_src: str
    ip_dst: str
    ip_checksum_ok: bool
    sport: int
    dport: int
    udp_checksum: int
    header: dict[str, int]
    values: tuple[int, ...]     # () for a header-only packet (REJECT, ACK)
    ip_len: int = 0             # IPv4 total length
    udp_len: int = 0            # UDP length
    trailing: int = 0           # bytes after the IPv4 datagram (Ethernet padding)


def ipv4_checksum_ok(ip_header: bytes) -> bool:
    total = sum(struct.unpack(f"!{len(ip_header) // 2}H", ip_header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


def parse_frame(frame: bytes, k: int = K_DEFAULT) -> Parsed:
    """Dissect an Ethernet/IPv4/UDP/netsum frame (raises if it is not one).  The UDP payload is
    what the UDP length says; a REJECT, and a RESULT with the ACK flag, must be the header
    alone, anything else the header and K values."""
    pkt = Ether(frame)
    if IP not in pkt or UDP not in pkt:
        raise ValueError(f"not IPv4/UDP: {pkt.summary()}")
    ihl = pkt[IP].ihl * 4
    at = 14 + ihl + 8
    body = frame[at:at + pkt[UDP].len - 8]
    if len(body) < HEADER_BYTES:
        raise ValueError(f"netsum payload of {len(body)} bytes, shorter than the header")
    header = wire.unpack_fields(body)
    bare = header["msg_type"] == MsgType.REJECT or (
        header["msg_type"] == MsgType.RESULT and header["flags"] & Flags.ACK)
    want = HEADER_BYTES if bare else HEADER_BYTES + 4 * k
    if len(body) != want:
        raise ValueError(f"netsum payload of {len(body)} bytes, expected {want}")
    values = () if bare else struct.unpack(f"!{k}i", body[HEADER_BYTES:want])
    return Parsed(pkt[Ether].src, pkt[Ether].dst, pkt[IP].src, pkt[IP].dst,
                  ipv4_checksum_ok(frame[14:14 + ihl]), pkt[UDP].sport, pkt[UDP].dport,
                  pkt[UDP].chksum, header, tuple(values), pkt[IP].len, pkt[UDP].len,
                  len(frame) - 14 - pkt[IP].len)


def one_reply(out: list[tuple[int, bytes]], to: Host, k: int = K_DEFAULT) -> Parsed:
    """The one frame the switch sent back, out of the port of `to` and addressed to it from
    the service address (a STATUS, a REJECT or a replayed RESULT), parsed."""
    assert [port for port, _ in out] == [to.port], out
    p = parse_frame(out[0][1], k)
    assert (p.eth_dst, p.ip_dst, p.dport) == (to.mac, to.ip, to.udp_port)
    assert (p.eth_src, p.ip_src, p.sport) == (SERVICE_MAC, SERVICE_IP, UDP_PORT)
    assert p.ip_checksum_ok and p.udp_checksum == 0
    return p


class NetsumSwitch:
    """netsum.p4 loaded into an embedded `netsum.switch.device.Device`, configured by table name."""

    ING = "NetsumIngress"
    EGR = "NetsumEgress"

    def __init__(self, config: bytes, device_id: int = 0, pipeline: Any = None) -> None:
        """`config`: the BMv2 JSON bytes (e.g. of `netsum.build.ensure_built(k)[0]`);
        `pipeline`: a `Pipeline` of that config built with other options (the Python path,
        unfused, native), installed instead of the default one -- building the default one
        only to replace it cost a test at K=2048 tens of seconds."""
        # Imported here: tests that only build frames do not need the switch package.
        from netsum.switch.device import Device

        self.device = Device(device_id=device_id)
        self.pipeline = Device.build_pipeline(config) if pipeline is None else pipeline
        self.device.install(self.pipeline)

    # ---- control plane ----
    def insert(self, table: str, key: Iterable[Any], action: str, params: Sequence[int] = ()) -> None:
        from netsum.switch.entries import ActionCall, TableEntry

        self.pipeline.tables[table].insert(
            TableEntry(key=tuple(key), action=ActionCall(action, tuple(params))))

    def add_job_root(self, job_id: int, slot_base: int, num_slots: int, num_workers: int,
                     mgid: int, job_workers: int | None = None) -> None:
        """`num_workers`: the contributors this switch aggregates; `job_workers`: the job's
        member count every DATA must say (default num_workers: a single-switch job)."""
        from netsum.switch.entries import Exact

        jw = num_workers if job_workers is None else job_workers
        _JOB_WORKERS[job_id] = jw
        self.insert(f"{self.ING}.job", [Exact(job_id)], f"{self.ING}.job_root",
                    [slot_base, num_slots, num_workers, mgid, jw])

    def add_job_leaf(self, job_id: int, slot_base: int, num_slots: int, num_workers: int,
                     mgid: int, up_port: int, leaf: Host, up: Host,
                     job_workers: int | None = None) -> None:
        from netsum.switch.entries import Exact

        jw = num_workers if job_workers is None else job_workers
        _JOB_WORKERS[job_id] = jw
        self.insert(f"{self.ING}.job", [Exact(job_id)], f"{self.ING}.job_leaf",
                    [slot_base, num_slots, num_workers, mgid, up_port, mac_int(leaf.mac),
                     ip_int(leaf.ip), mac_int(up.mac), ip_int(up.ip), jw])

    def add_member(self, job_id: int, host: Host, index: int, rank: int | None = None) -> None:
        """Membership as the controller installs it: (job, the host's port, IPv4, MAC) ->
        its bit and its rank in the job (default: its index; RANK_SWITCH for a leaf)."""
        from netsum.switch.entries import Exact

        self.insert(f"{self.ING}.member", [Exact(job_id), Exact(host.port), Exact(ip_int(host.ip)),
                                           Exact(mac_int(host.mac))],
                    f"{self.ING}.set_member", [1 << index, index if rank is None else rank])

    def add_service(self, ip: str, parent_port: int | None = None) -> None:
        """`service_src`: `ip` is this switch's own service address (no frame from outside may
        carry it), or, with `parent_port`, its parent's (accepted on that port only)."""
        from netsum.switch.entries import Exact

        if parent_port is None:
            self.insert(f"{self.ING}.service_src", [Exact(ip_int(ip))], f"{self.ING}.own_service")
        else:
            self.insert(f"{self.ING}.service_src", [Exact(ip_int(ip))],
                        f"{self.ING}.parent_service", [parent_port])

    def allow_results(self, job_id: int, ports: Iterable[int]) -> None:
        """`result_port` entries: the job's RESULTs may leave on these ports (its members')."""
        from netsum.switch.entries import Exact

        for port in sorted(set(ports)):
            self.insert(f"{self.EGR}.result_port", [Exact(job_id), Exact(port)],
                        f"{self.EGR}.allow_result")

    def add_result_group(self, mgid: int, hosts: Sequence[Host], rid_base: int,
                         ranks: Sequence[int] | None = None) -> None:
        """Multicast group + one replica rewrite per host (rid = rid_base + position), each
        copy for the host's rank (default: its position)."""
        from netsum.switch.entries import Exact, Replica

        ranks = list(range(len(hosts))) if ranks is None else list(ranks)
        self.pipeline.pre.mc_group_insert(
            mgid, [Replica(h.port, rid_base + i) for i, h in enumerate(hosts)])
        for i, h in enumerate(hosts):
            self.insert(f"{self.EGR}.replica", [Exact(rid_base + i), Exact(h.port)],
                        f"{self.EGR}.set_replica",
                        [mac_int(h.mac), ip_int(h.ip), h.udp_port, ranks[i]])

    def add_job(self, job_id: int, hosts: Sequence[Host], *, slot_base: int = 0,
                num_slots: int = 16, mgid: int | None = None, rid_base: int | None = None,
                job_workers: int | None = None, ranks: Sequence[int] | None = None) -> None:
        """A root job with `hosts` as members (worker index = position; rank = position
        unless `ranks` says otherwise, e.g. RANK_SWITCH for leaves)."""
        mgid = mgid if mgid is not None else 100 + job_id
        ranks = list(range(len(hosts))) if ranks is None else list(ranks)
        self.add_job_root(job_id, slot_base, num_slots, len(hosts), mgid, job_workers)
        for i, h in enumerate(hosts):
            self.add_member(job_id, h, i, ranks[i])
        self.add_result_group(mgid, hosts, rid_base if rid_base is not None else job_id * 64 + 1,
                              ranks)
        self.allow_results(job_id, (h.port for h in hosts))

    def add_leaf_job(self, job_id: int, hosts: Sequence[Host], *, leaf: Host, up: Host,
                     up_port: int, num_slots: int = 8, mgid: int = 50,
                     job_workers: int | None = None) -> None:
        """A leaf's job: `hosts` its workers (index and rank = position, replicas from rid 1,
        results on their ports), `leaf` its service address, `up` the parent's on `up_port`."""
        self.add_job_leaf(job_id, slot_base=0, num_slots=num_slots, num_workers=len(hosts),
                          mgid=mgid, up_port=up_port, leaf=leaf, up=up, job_workers=job_workers)
        for i, h in enumerate(hosts):
            self.add_member(job_id, h, i)
        self.add_result_group(mgid, hosts, rid_base=1)
        self.allow_results(job_id, [h.port for h in hosts])

    def set_epoch(self, job_id: int, epoch: int) -> None:
        """What a controller does when it re-installs a job id: rounds left by the earlier run
        in the job's slots then count as empty."""
        from netsum.switch.entries import Exact

        self.insert(f"{self.ING}.job_epoch", [Exact(job_id)], f"{self.ING}.set_epoch", [epoch])

    def set_drop_rate(self, port: int, threshold: int, egress: bool = False) -> None:
        from netsum.switch.entries import Exact

        ctl, suffix = (self.EGR, "out") if egress else (self.ING, "in")
        self.insert(f"{ctl}.drop_sim_{suffix}", [Exact(port)], f"{ctl}.set_drop_{suffix}",
                    [threshold])

    # ---- data plane ----
    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """The frames out; an exception on the packet path (which the Device turns into a drop
        and stats.internal_errors) fails the test instead of passing for a refusal."""
        before = self.device.stats.internal_errors
        out = self.device.process(port, frame)
        assert self.device.stats.internal_errors == before, \
            f"internal error on the packet path: {self.device.first_error}"
        return out

    def counter(self, name: str, index: int) -> int:
        """Packets counted by `NetsumIngress.<name>` or `NetsumEgress.<name>` at index."""
        for ctl in (self.ING, self.EGR):
            full = f"{ctl}.{name}"
            if full in self.pipeline.counters:
                return self.pipeline.counters[full].read(index).packets
        raise KeyError(f"no counter {name}")

    def register(self, name: str, index: int) -> int:
        return self.pipeline.registers[f"{self.ING}.{name}"].read(index)
