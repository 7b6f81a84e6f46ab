"""Host all-reduce plans and the messages of their TCP streams; pure (no sockets, no clock).

Owns:
- the ring schedule of a bandwidth-optimal all-reduce (reduce-scatter, then all-gather): the
  tensor's K-blocks split into n contiguous segments, each segment into pieces of at most P
  blocks, and which segment rank r sends and receives at each of the 2(n-1) steps;
- the 16-byte header every message of a host stream starts with, and HELLO, the first message
  of each stream, which names the sender so a mis-wired peer list fails loudly.

Schedule.  Steps g = 0..n-2 are the reduce-scatter, g = n-1..2n-3 the all-gather; at every
step rank r sends segment (r - g) mod n to its right neighbour (r + 1) and receives segment
(r - 1 - g) mod n from its left neighbour (r - 1).  So the segment received at step g is the
one sent at step g + 1: each received piece triggers exactly one sent piece (after adding this
rank's contribution during the reduce-scatter), and only step 0 (this rank's own segment) is
sent unprompted.  After step n-2 rank r holds the complete sum of segment (r + 1) mod n, which
is what it sends first in the all-gather.  Each rank sends 2(n-1) segments of about nb/n
blocks: 2(n-1)/n of the tensor, the lower bound for any all-reduce between hosts.
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

__all__ = ["Kind", "Header", "Hello", "Piece", "HEADER", "HELLO", "MAGIC", "VERSION",
           "segments", "pieces", "send_segment", "recv_segment", "steps", "receives",
           "RingWireError"]

MAGIC = 0x6E73_686F          # "nsho": a netsum host stream
VERSION = 1


class RingWireError(ValueError):
    """A message of a host stream does not parse."""


class Kind(enum.IntEnum):
    HELLO = 1       # first message of a stream: who is speaking (payload: Hello)
    BEGIN = 2       # first message of each all-reduce call: its element count (first_block)
    EXPONENTS = 3   # uint8 per block: block exponent proposals, max-reduced
    VALUES = 4      # K big-endian int32 per block: quantized values, summed


@dataclass(frozen=True, slots=True)
class Header:
    """kind 8 | version 8 | job 16 | call 16 | step 16 | first_block 32 | blocks 32."""
    kind: Kind
    job: int
    call: int           # the all-reduce call on this connection, modulo 2^16
    step: int
    first_block: int
    blocks: int

    FORMAT = struct.Struct(">BBHHHII")

    def encode(self) -> bytes:
        return self.FORMAT.pack(self.kind, VERSION, self.job, self.call & 0xFFFF, self.step,
                                self.first_block, self.blocks)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> "Header":
        kind, version, job, call, step, first, blocks = cls.FORMAT.unpack(data)
        if version != VERSION:
            raise RingWireError(f"host stream version {version}, expected {VERSION}")
        try:
            k = Kind(kind)
        except ValueError:
            raise RingWireError(f"unknown message kind {kind}") from None
        return cls(k, job, call, step, first, blocks)


HEADER = Header.FORMAT.size


@dataclass(frozen=True, slots=True)
class Hello:
    """Payload of HELLO: magic, algorithm, sender rank, ring size, K, job."""
    algorithm: str      # "ring" | "ps"
    rank: int
    workers: int
    k: int
    job: int

    FORMAT = struct.Struct(">I4sHHHH")
    _ALGOS = ("ring", "ps")

    def encode(self) -> bytes:
        return self.FORMAT.pack(MAGIC, self.algorithm.encode().ljust(4, b"\0"), self.rank,
                                self.workers, self.k, self.job)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> "Hello":
        if len(data) != cls.FORMAT.size:
            raise RingWireError(f"HELLO of {len(data)} bytes, expected {cls.FORMAT.size}")
        magic, algo, rank, workers, k, job = cls.FORMAT.unpack(data)
        if magic != MAGIC:
            raise RingWireError(f"not a netsum host stream (magic {magic:#010x})")
        name = algo.rstrip(b"\0").decode(errors="replace")
        if name not in cls._ALGOS:
            raise RingWireError(f"unknown algorithm {name!r} in HELLO")
        return cls(name, rank, workers, k, job)


HELLO = Hello.FORMAT.size


@dataclass(frozen=True, slots=True)
class Piece:
    """Blocks first_block .. first_block + blocks - 1 of the tensor."""
    first_block: int
    blocks: int

    @property
    def stop(self) -> int:
        return self.first_block + self.blocks


def segments(num_blocks: int, workers: int) -> list[tuple[int, int]]:
    """[start, stop) block range of each rank's segment: contiguous, sizes differ by <= 1
    (some are empty when there are fewer blocks than workers)."""
    if workers < 1 or num_blocks < 0:
        raise ValueError(f"need workers >= 1 and num_blocks >= 0, got {workers}, {num_blocks}")
    return [(i * num_blocks // workers, (i + 1) * num_blocks // workers) for i in range(workers)]


def pieces(start: int, stop: int, piece_blocks: int) -> list[Piece]:
    """The pieces of blocks [start, stop), each at most piece_blocks long."""
    if piece_blocks < 1:
        raise ValueError(f"piece_blocks must be >= 1, got {piece_blocks}")
    return [Piece(b, min(piece_blocks, stop - b)) for b in range(start, stop, piece_blocks)]


def steps(workers: int) -> int:
    """Steps of a ring all-reduce: n-1 of reduce-scatter, n-1 of all-gather."""
    return 2 * (workers - 1)


def send_segment(rank: int, step: int, workers: int) -> int:
    return (rank - step) % workers


def recv_segment(rank: int, step: int, workers: int) -> int:
    return (rank - 1 - step) % workers


def receives(rank: int, workers: int, num_blocks: int,
             piece_blocks: int) -> list[tuple[int, Piece]]:
    """Every (step, piece) rank `rank` receives from its left neighbour, in stream order."""
    segs = segments(num_blocks, workers)
    out = []
    for g in range(steps(workers)):
        lo, hi = segs[recv_segment(rank, g, workers)]
        out += [(g, p) for p in pieces(lo, hi, piece_blocks)]
    return out
