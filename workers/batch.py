"""Whole-tensor quantize + encode: every block of a tensor as one contiguous buffer of netsum
DATA packets, vectorised (the throughput path measured by benchmarks/quantize.py, and what a
sender that knows all agreed exponents up front would transmit).  The worker core's streaming
path quantizes block by block instead, because it learns exponents one slot-use at a time.
"""
from __future__ import annotations

import numpy as np

from netsum.wire import EXP_ZERO, MAX_SLOTS, ROUND_BITS, MsgType
from netsum.workers import quant, wire
from netsum.workers.errors import QuantError

__all__ = ["encode_tensor"]


def encode_tensor(x: np.ndarray, agreed: np.ndarray, num_workers: int, k: int, job_id: int,
                  num_slots: int, proposals_ahead: np.ndarray | None = None,
                  first_rounds: np.ndarray | None = None) -> np.ndarray:
    """DATA packets for every block of float32 `x`: block b on slot b % num_slots, its round
    counting the uses of the slot from `first_rounds[slot]` (default 0), quantized with
    `agreed[b]`, exp = `proposals_ahead[b]` (default EXP_ZERO).  Returns the structured batch
    (`.tobytes()` is the wire bytes back to back)."""
    x = quant.as_tensor(x)
    nb = quant.num_blocks(len(x), k)
    if not 1 <= num_slots <= MAX_SLOTS:
        raise QuantError(f"num_slots must be 1..{MAX_SLOTS}, got {num_slots}")
    blocks = np.arange(nb, dtype=np.int64)
    slot = blocks % num_slots
    start = np.zeros(num_slots, np.int64) if first_rounds is None else \
        np.asarray(first_rounds, dtype=np.int64)
    fields: dict[str, int | np.ndarray] = {
        "msg_type": int(MsgType.DATA), "job_id": job_id, "slot": slot,
        "round": (start[slot] + blocks // num_slots) % (1 << ROUND_BITS), "offset": blocks * k,
        "exp": EXP_ZERO if proposals_ahead is None else proposals_ahead}
    rec = wire.encode_batch(fields, None, k, count=nb, fill=False)
    quant.quantize(x, agreed, num_workers, k, out=rec["values"])
    return rec
