"""UDP segmentation offload (GSO) and receive coalescing (GRO) on loopback UDP sockets.

Linux (>= 5.0) lets a sender hand several same-size datagrams for one destination to ONE
sendmsg with a `UDP_SEGMENT` control message (the segment size; the last segment may be
shorter), and a socket with `setsockopt(SOL_UDP, UDP_GRO, 1)` receive datagrams that came
that way as one buffer with a `UDP_GRO` control message giving the segment size.  On
loopback such a send reaches a GRO socket unsegmented: one trip through the stack for up to
64 datagrams, where plain sendmmsg/recvmmsg pay the stack per datagram (docs/performance.md
section 17 has the figures).  The datagrams on the wire are the same: a receiver without
UDP_GRO gets them one by one (the kernel segments them on delivery).

Used by the switch's UDP-tunnel ports (netsum/switch/native/ioloop.c: a coalesced buffer
is split into its datagrams, each its own frame through the pipeline; outputs of equal length
to one port go out as one GSO send) and by the workers' UDP sockets (workers/wgso.c: a core's
queued frames, all of one length, as GSO sends).  GSO sends go to loopback addresses only
(`sends_to`); GRO, which only changes how a socket hands over what already arrived, is on
wherever the C loops read.  `NETSUM_UDP_GSO=0` turns both off (A/B
runs); the kernel refusing a GSO send (EIO, EINVAL, ENOPROTOOPT, EOPNOTSUPP: no checksum
offload on the route, a segment above the route's MTU, ...) turns it off for that socket
and the same frames go out one by one.

This module holds the knob, the constants and the split rule every receive path applies to
a coalesced buffer (the Python switch loop reads the same sockets when the C loop stands
aside).  It imports nothing of the project.
"""
from __future__ import annotations

import ipaddress
import os
import socket

__all__ = ["ENV", "SOL_UDP", "UDP_SEGMENT", "UDP_GRO", "MAX_SEGMENTS", "MAX_BYTES", "enabled",
           "sends_to", "enable_gro", "segments", "segment_size", "split", "plan_groups"]

ENV = "NETSUM_UDP_GSO"
SOL_UDP = 17                # <netinet/udp.h>: IPPROTO_UDP as a socket level
UDP_SEGMENT = 103
UDP_GRO = 104
MAX_SEGMENTS = 64           # UDP_MAX_SEGMENTS of Linux 5.0-6.9 (128 since; 64 works on both)
MAX_BYTES = 65507           # the most UDP payload one IPv4 datagram (hence one GSO send) holds


def enabled() -> bool:
    """Whether GSO/GRO may be used: Linux, and NETSUM_UDP_GSO is not "0"."""
    return os.environ.get(ENV, "1").strip() != "0" and hasattr(socket, "CMSG_SPACE") and \
        os.uname().sysname == "Linux"


def sends_to(host: str) -> bool:
    """Whether datagrams to `host` may leave as GSO sends: enabled() and a loopback address.
    Not over a real or virtual link (veth, Mininet): a GSO send reaches the link's qdisc as
    one large packet, so shaping (tbf, netem) would see one 64 KB burst, not its datagrams."""
    try:
        return enabled() and ipaddress.ip_address(host.partition("%")[0]).is_loopback
    except ValueError:
        return False


def enable_gro(sock: socket.socket) -> bool:
    """Turn UDP_GRO on for `sock` when enabled(); False where off or the kernel refuses
    (then datagrams keep arriving one by one, which every receive path handles anyway)."""
    if not enabled():
        return False
    try:
        sock.setsockopt(SOL_UDP, UDP_GRO, 1)
    except OSError:
        return False
    return True


def segment_size(ancillary: list[tuple[int, int, bytes]]) -> int:
    """The UDP_GRO segment size in recvmsg's ancillary data, 0 when there is none (the
    buffer is one datagram)."""
    for level, kind, data in ancillary:
        if level == SOL_UDP and kind == UDP_GRO and len(data) >= 2:
            # the kernel puts an int (4 bytes) here; a u16 on some versions: read what came
            return int.from_bytes(data[:4] if len(data) >= 4 else data[:2], "little")
    return 0


def segments(length: int, seg: int) -> int:
    """How many datagrams a coalesced buffer of `length` bytes with segment size `seg` holds
    (`seg` <= 0 or >= length: the buffer is one datagram)."""
    if seg <= 0 or seg >= length:
        return 1
    return -(-length // seg)


def split(length: int, seg: int) -> list[tuple[int, int]]:
    """(offset, length) of each datagram in a coalesced buffer: every `seg` bytes, the last
    one what is left (shorter, never empty).  The rule of ioloop.c's receive, in Python."""
    if seg <= 0 or seg >= length:
        return [(0, length)]
    return [(off, min(seg, length - off)) for off in range(0, length, seg)]


def plan_groups(lengths: list[int], max_bytes: int = MAX_BYTES,
                max_segments: int = MAX_SEGMENTS) -> list[tuple[int, int]]:
    """(first, count) of each send when datagrams of `lengths` (to one destination, in this
    order) are grouped as ioloop.c groups them: a run of equal lengths, optionally ended by
    one shorter datagram (a GSO send's last segment may be shorter, but not empty: an empty
    datagram would vanish in it), at most `max_segments` datagrams and `max_bytes` bytes;
    count 1 is a plain send."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(lengths)
    while i < n:
        seg, total, j = lengths[i], lengths[i], i + 1
        while j < n and j - i < max_segments and total + lengths[j] <= max_bytes and \
                0 < lengths[j] <= seg:
            total += lengths[j]
            j += 1
            if lengths[j - 1] < seg:
                break           # a shorter segment ends the send
        out.append((i, j - i))
        i = j
    return out
