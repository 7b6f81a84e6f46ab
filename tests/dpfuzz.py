"""A seeded generator of malformed and hostile frames for the data-plane fuzz tests, built here
with struct (no code of the workers' codec), each with the job counter of netsum.p4 it must
raise: the expectation comes from p4/README.md's packet walk, not from the switch.

What a frame may be, and why it cannot touch the running job's sums:
- `random`: random bytes of any length 0..1600 (a random frame is no netsum packet).
- `truncated`: a DATA of the job with a member's own addresses, cut at or inside a header
  boundary or a value; cut after the netsum header it is `drop_malformed`.
- `not_netsum`: IPv4/UDP frames that are no aggregation traffic -- another UDP port, IP
  options, a fragment, another protocol or ethertype -- forwarded by `dmac` like any frame,
  or (protocol v2) dropped on a per-port counter when they come from the netsum port, or
  carry it behind options (`drop_unaggregated`, `drop_irregular`: no counter of the job).
- `bad_type`: the job's header from a member with a msg_type other than DATA (`drop_bad_type`).
- `bad_slot`: a member's DATA for a slot past the job's range (`drop_bad_slot`; the switch
  answers the member with a REJECT(SLOT), which the member's worker -- whose own slots are in
  range -- counts and ignores).
- `stale`: a member's DATA for a round 2^30..2^31 older than any the job reaches (rounds
  compare modulo 2^32), which the switch never adds (`drop_stale`).
- `unknown_job`: a member's DATA for a job id with no `job` entry (`drop_unknown_job`, on a
  row of its own).
- `forged`: valid-looking DATA of the job -- any slot in range, any round, offset, exponent,
  count, flags, IPv4/UDP lengths and checksums, oversize payloads -- from an address that is
  not a member on that port: a member's addresses on the rogue port, another member's
  addresses on a member port, or made-up ones (`drop_non_member`).

Not generated, by design: DATA of the job's current round from a member's own port, MAC and
IPv4 address.  The switch identifies a member by exactly those (docs/protocol.md); such a
frame *is* that member's contribution, whatever it carries.
"""
from __future__ import annotations

import random
import struct
from dataclasses import dataclass

from netsum.wire import HEADER_BYTES
from netsum.workers import wire

__all__ = ["Host", "FuzzTarget", "Fuzzed", "KINDS", "fuzz_frames", "ipv4_checksum"]

UDP_PORT = 0x6E73            # the aggregation service port (docs/protocol.md)
DATA = 1
ETH, IP, UDP, HDR = 14, 20, 8, HEADER_BYTES
LENGTH = 1 << 20             # the `length` the frames of the job say
NETSUM_AT = ETH + IP + UDP


@dataclass(frozen=True, slots=True)
class Host:
    mac: bytes               # 6 bytes
    ip: bytes                # 4 bytes


@dataclass(frozen=True, slots=True)
class FuzzTarget:
    """The running job the frames aim at: members[i] sits on link i; link len(members) is the
    rogue port (a host of the topology that is not a member of the job)."""
    job: int
    slots: int
    k: int
    service: Host
    members: tuple[Host, ...]

    @property
    def klog2(self) -> int:
        return self.k.bit_length() - 1

    @property
    def rogue_link(self) -> int:
        return len(self.members)


@dataclass(frozen=True, slots=True)
class Fuzzed:
    kind: str
    link: int                # which switch port it goes into (index as in FuzzTarget)
    frame: bytes
    counter: str | None      # the job's counter it raises by one, None: no counter of the job


KINDS = ("random", "truncated", "not_netsum", "bad_type", "bad_slot", "stale", "unknown_job",
         "forged")


def ipv4_checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _frame(src: Host, dst: Host, payload: bytes, *, ip_len: int | None = None,
           udp_len: int | None = None, bad_ip_csum: bool = False, udp_csum: int = 0,
           sport: int = UDP_PORT, dport: int = UDP_PORT, proto: int = 17,
           ethertype: int = 0x0800, frag: int = 0x4000, options: bytes = b"") -> bytes:
    ihl = 5 + len(options) // 4
    udp = struct.pack("!HHHH", sport, dport,
                      (UDP + len(payload)) if udp_len is None else udp_len, udp_csum)
    length = (4 * ihl + UDP + len(payload)) if ip_len is None else ip_len
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, length & 0xFFFF, 0, frag, 64,
                               proto, 0, src.ip, dst.ip) + options)
    csum = ipv4_checksum(bytes(ip))
    struct.pack_into("!H", ip, 10, csum ^ 0x5A5A if bad_ip_csum else csum)
    return dst.mac + src.mac + struct.pack("!H", ethertype) + bytes(ip) + udp + payload


def _header(msg: int, job: int, slot: int, rnd: int, off: int, exp: int = 130, count: int = 0,
            flags: int = 0, workers: int = 0, dest: int = 0xFF, reason: int = 0,
            klog2: int = 0, length: int = LENGTH) -> bytes:
    return wire.pack(msg_type=msg, flags=flags, job_id=job, slot=slot, exp=exp, count=count,
                     round=rnd, offset=off, workers=workers, dest=dest, reason=reason,
                     klog2=klog2, length=length)


class _Gen:
    def __init__(self, t: FuzzTarget, rng: random.Random) -> None:
        self.t, self.rng = t, rng

    def values(self, n: int | None = None) -> bytes:
        return self.rng.randbytes(4 * (self.t.k if n is None else n))

    def member_link(self) -> int:
        return self.rng.randrange(len(self.t.members))

    def any_link(self) -> int:
        return self.rng.randrange(len(self.t.members) + 1)

    def small_round(self) -> int:
        return self.rng.randrange(0, 1 << 12)

    def data(self, link: int, **fields: int) -> bytes:
        t, r = self.t, self.rng
        # what a correctly configured member says (v2): the job's count, its K
        hdr = dict(msg=DATA, job=t.job, slot=r.randrange(t.slots), rnd=self.small_round(),
                   off=r.randrange(1 << 20) * t.k, workers=len(t.members), klog2=t.klog2)
        hdr.update(fields)
        return _frame(t.members[link], t.service, _header(**hdr) + self.values())

    def random(self) -> Fuzzed:
        n = self.rng.choice((0, 1, 13, 14, 41, 42, 58, 60, 100, 186, 1500, 1600,
                             self.rng.randrange(1601)))
        return Fuzzed("random", self.any_link(), self.rng.randbytes(n), None)

    def truncated(self) -> Fuzzed:
        link, k = self.member_link(), self.t.k
        whole = self.data(link)
        bounds = [0, 6, 12, 13, 14, 15, 33, 34, 35, 41, 42, 43, 44, 46, 50, 57, 58, 59, 62,
                  65, 66]
        cut = self.rng.choice(bounds + [NETSUM_AT + HDR + self.rng.randrange(4 * k)])
        return Fuzzed("truncated", link, whole[:cut],
                      "drop_malformed" if cut >= NETSUM_AT + HDR else None)

    def not_netsum(self) -> Fuzzed:
        t, r = self.t, self.rng
        link = self.any_link()
        src = t.members[link] if link < len(t.members) else t.members[0]
        dst = t.members[r.randrange(len(t.members))] if r.random() < 0.5 else \
            Host(b"\xff" * 6, b"\xff" * 4)
        payload = _header(DATA, t.job, r.randrange(t.slots), 0, 0, workers=len(t.members),
                          klog2=t.klog2) + self.values()
        way = r.randrange(5)
        if way == 0:
            frame = _frame(src, dst, payload, dport=r.choice((53, 5000, UDP_PORT + 1)))
        elif way == 1:
            frame = _frame(src, dst, payload, options=b"\x01\x01\x01\x00")   # NOP NOP NOP EOL
        elif way == 2:
            frame = _frame(src, dst, payload, frag=r.randrange(1, 0x2000) | 0x2000)
        elif way == 3:
            frame = _frame(src, dst, payload, proto=r.choice((1, 6, 47, 132)))
        else:
            frame = _frame(src, dst, payload, ethertype=r.choice((0x86DD, 0x8100, 0x88CC, 0x0806)))
        return Fuzzed("not_netsum", link, frame, None)

    def bad_type(self) -> Fuzzed:
        link = self.member_link()
        msg = self.rng.choice([0, 2, 3, 0x80, 0xFF, self.rng.randrange(2, 256)])
        return Fuzzed("bad_type", link, self.data(link, msg=msg), "drop_bad_type")

    def bad_slot(self) -> Fuzzed:
        link = self.member_link()
        slot = self.rng.choice([self.t.slots, self.t.slots + 1, 0xFFFF,
                                self.rng.randrange(self.t.slots, 0x10000)])
        return Fuzzed("bad_slot", link, self.data(link, slot=slot), "drop_bad_slot")

    def stale(self) -> Fuzzed:
        link = self.member_link()
        rnd = self.rng.randrange((1 << 31) + (1 << 30), (1 << 32) - (1 << 20))
        return Fuzzed("stale", link, self.data(link, rnd=rnd), "drop_stale")

    def unknown_job(self) -> Fuzzed:
        link = self.member_link()
        job = self.rng.choice([0, self.t.job + 1, 0xFF, 0x100, 0xFFFF,
                               self.rng.randrange(self.t.job + 1, 0x10000)])
        return Fuzzed("unknown_job", link, self.data(link, job=job), None)

    def forged(self) -> Fuzzed:
        t, r = self.t, self.rng
        n = len(t.members)
        link = self.any_link()
        if link == n:
            src = t.members[r.randrange(n)]                       # a member's own addresses
        elif r.random() < 0.5:
            src = t.members[(link + 1 + r.randrange(n - 1)) % n]  # another member's
        else:
            src = Host(t.members[link].mac if r.random() < 0.5 else b"\x02" + r.randbytes(5),
                       r.randbytes(4))                            # half of it its own, or none
        hdr = _header(DATA, t.job, r.randrange(t.slots), r.randrange(1 << 32),
                      r.randrange(1 << 32), exp=r.randrange(256), count=r.randrange(256),
                      flags=r.randrange(256), workers=r.randrange(256), dest=r.randrange(256),
                      reason=r.randrange(256), klog2=r.randrange(256),
                      length=r.randrange(1 << 32))
        values = self.values(r.choice((t.k, t.k, t.k, t.k + 1, 2 * t.k, 360, 2000)))  # 2000: oversize
        opts: dict[str, int | bool] = {}
        twist = r.randrange(4)
        if twist == 1:
            opts = {"ip_len": r.randrange(1 << 16), "udp_len": r.randrange(1 << 16)}
        elif twist == 2:
            opts = {"bad_ip_csum": True, "udp_csum": r.randrange(1, 1 << 16)}
        frame = _frame(src, t.service, hdr + values, **opts)  # type: ignore[arg-type]
        return Fuzzed("forged", link, frame, "drop_non_member")


def fuzz_frames(target: FuzzTarget, rng: random.Random, count: int) -> list[Fuzzed]:
    """`count` frames, the kinds in equal shares, in random order."""
    gen = _Gen(target, rng)
    makers = [getattr(gen, kind) for kind in KINDS]
    return [makers[i % len(makers)]() for i in rng.sample(range(count), count)]
