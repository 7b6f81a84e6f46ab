"""How a call cuts its tensor into K-element blocks, and which rank owns each block's sums.

All-reduce: blocks of K consecutive elements, the last zero-padded, every block's RESULT to
every rank (`dest` = DEST_ALL).  Reduce-scatter over n shards: each shard is cut into blocks of
its own (a block never straddles two shards; the last block of a shard is zero-padded), and
each block's RESULT values go to the shard's owner alone (`dest` = its rank); the others get an
ACK (docs/protocol.md, "Reduce-scatter").  Every block keeps its element offset in the whole
tensor, which its packets carry.

Also the per-block view of per-element facts the caller needs for the NONFINITE flag: which
blocks hold a NaN/Inf (`any_per_block`) and, back again, which elements a flagged block covers
(`per_element`).  Pure numpy; no protocol state.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netsum.wire import DEST_ALL, MAX_WORKERS
from netsum.workers.errors import QuantError

__all__ = ["BlockPlan", "plan_blocks", "even_shards"]


@dataclass(frozen=True, slots=True, eq=False)
class BlockPlan:
    """The blocks of one call.  Per block b: `starts[b]` its first element in the tensor,
    `sizes[b]` its real elements (<= k; the rest of its K values is padding), `owners[b]` the
    rank its sums go to (DEST_ALL: every rank).  `shards[r]` = (first element, length) of rank
    r's shard; empty for an all-reduce."""
    k: int
    length: int
    starts: np.ndarray
    sizes: np.ndarray
    owners: np.ndarray
    shards: tuple[tuple[int, int], ...] = ()

    @property
    def num_blocks(self) -> int:
        return len(self.starts)

    def blocks_of(self, rank: int) -> tuple[int, int]:
        """Blocks [first, stop) of rank `rank`'s shard (reduce-scatter: contiguous)."""
        if not self.shards:
            raise ValueError("an all-reduce has no shards")
        hits = np.flatnonzero(self.owners == rank)
        if not len(hits):
            return (0, 0)
        return int(hits[0]), int(hits[-1]) + 1

    def rows(self, x: np.ndarray) -> np.ndarray:
        """(num_blocks, k) float32: block b holds x[starts[b]:starts[b] + sizes[b]], then
        zeros.  A view of x when the blocks are x's consecutive K-runs (an all-reduce of a
        multiple of K elements)."""
        nb, k = self.num_blocks, self.k
        if not self.shards and len(x) == nb * k:
            return x.reshape(nb, k)
        out = np.zeros((nb, k), dtype=np.float32)
        if not self.shards:
            out.reshape(-1)[:len(x)] = x
            return out
        for a, n in self.shards:
            if n:
                b0, b1 = self._span(a, n)
                out[b0:b1].reshape(-1)[:n] = x[a:a + n]
        return out

    def _span(self, start: int, n: int) -> tuple[int, int]:
        b0 = int(np.searchsorted(self.starts, start))
        return b0, b0 + -(-n // self.k)

    def any_per_block(self, mask: np.ndarray) -> np.ndarray:
        """Per block: whether any of its elements is set in the per-element boolean `mask`
        (e.g. `~np.isfinite(x)`, for the NONFINITE flag of its DATA)."""
        mask = np.asarray(mask, dtype=bool).reshape(-1)
        if len(mask) != self.length:
            raise ValueError(f"mask of {len(mask)} elements for a tensor of {self.length}")
        return np.asarray(self.rows(mask.astype(np.float32)).any(axis=1))

    def per_element(self, per_block: np.ndarray) -> np.ndarray:
        """Per element of the tensor: the value of its block in `per_block` (e.g. the RESULT
        flags of a call, to find the elements a NONFINITE block covers)."""
        per_block = np.asarray(per_block)
        if per_block.shape != (self.num_blocks,):
            raise ValueError(f"{per_block.shape} values for {self.num_blocks} blocks")
        if not self.shards:
            return np.repeat(per_block, self.k)[:self.length]
        out = np.zeros(self.length, dtype=per_block.dtype)
        for a, n in self.shards:
            if n:
                b0, b1 = self._span(a, n)
                out[a:a + n] = np.repeat(per_block[b0:b1], self.k)[:n]
        return out


def even_shards(length: int, n: int) -> tuple[int, ...]:
    """Shard lengths of torch's reduce_scatter_tensor layout: n equal parts, the first
    `length % n` one element longer."""
    if not 1 <= n <= MAX_WORKERS:
        raise QuantError(f"reduce-scatter needs 1..{MAX_WORKERS} shards, got {n}")
    base, extra = divmod(length, n)
    return tuple(base + (r < extra) for r in range(n))


@functools.lru_cache(maxsize=32)
def _allreduce_plan(length: int, k: int) -> BlockPlan:
    """An all-reduce's plan, kept for the last few (length, K): a training loop or a Worker
    calls with the same few lengths again and again, and making one is a sixth of a
    one-packet call's set-up.  Its arrays are read-only (one plan serves many calls)."""
    nb = -(-length // k)
    starts = np.arange(nb, dtype=np.int64) * k
    sizes = np.minimum(k, length - starts)
    owners = np.full(nb, DEST_ALL, dtype=np.int64)
    for a in (starts, sizes, owners):
        a.flags.writeable = False
    return BlockPlan(k, length, starts, sizes, owners)


def plan_blocks(length: int, k: int, shards: Sequence[int] | None = None) -> BlockPlan:
    """The blocks of a tensor of `length` elements: an all-reduce (`shards` None), or a
    reduce-scatter whose rank r owns the next `shards[r]` elements (they add up to
    `length`)."""
    if length < 1:
        raise QuantError(f"a tensor of {length} elements has nothing to send")
    if shards is None:
        return _allreduce_plan(length, k)
    sh = [int(n) for n in shards]
    if not 1 <= len(sh) <= MAX_WORKERS or any(n < 0 for n in sh) or sum(sh) != length:
        raise QuantError(f"shards {sh} must be 1..{MAX_WORKERS} lengths >= 0 adding up to the "
                         f"tensor's {length} elements")
    starts_l: list[int] = []
    sizes_l: list[int] = []
    owners_l: list[int] = []
    ranges = []
    at = 0
    for rank, n in enumerate(sh):
        ranges.append((at, n))
        for a in range(at, at + n, k):
            starts_l.append(a)
            sizes_l.append(min(k, at + n - a))
            owners_l.append(rank)
        at += n
    return BlockPlan(k, length, np.array(starts_l, dtype=np.int64),
                     np.array(sizes_l, dtype=np.int64), np.array(owners_l, dtype=np.int64),
                     tuple(ranges))
