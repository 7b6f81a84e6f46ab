"""The send window's one buffer: every slot's packet kept in place, ready to send.

Row i of one `bytearray` is slot i's frame: `prefix` (a transport's link-layer headers, fixed
for the whole call; empty for kernel UDP), then the netsum header, then K big-endian int32.
What never changes for the row (prefix, msg_type DATA, job_id, slot i, count 0, and protocol
v2's workers, klog2 and length: what the sum's meaning depends on) is written once; a launch writes flags (NONFINITE, as the caller flagged the block) and, with one struct
call, exp, round, offset, dest (the block's owner, or DEST_ALL) and qexp (the exponent the
values are quantized with, in the `reason` byte), and the block's
values are written by numpy straight into the row (`flush`).  A retransmission sends the row
as it is with RETX set.  Transports send `frames[i]` (a memoryview), so a packet is never
built, copied or concatenated as a Python object.

Quantization is deferred to `flush()` at the end of the core's call: the blocks launched by
one batch of results mostly run consecutively over consecutive slots, so each run is two
numpy calls (multiply by the per-block factor 2^(s-E), rint into the big-endian rows) however
long it is.  The integers are those of `quant.quantize_block` (float64): multiplying a float32
by a power of two that float32 represents is exact (a product below 2^-126 rounds to 0 under
rint either way), and rint of a float32 is exact.  Agreed exponents so small that 2^(s-E)
exceeds float32 (E below 2^-97 for every shift) take `quant.quantize_block` itself.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from netsum.wire import EXP_BIAS, EXP_ZERO, HEADER_BYTES, MsgType, klog2
from netsum.workers import quant, wire

__all__ = ["TxWindow"]

# Largest power of two float32 holds: 2^(s-E) beyond it needs float64.
_F32_MAX_EXP = 127


@functools.lru_cache(maxsize=64)
def _factors(shift: int) -> tuple[float | None, ...]:
    """Per biased exponent e: 2^(shift-E) as a float (0 for EXP_ZERO), None where float32 has
    no such factor (the float64 path).  One table per scale shift, made once: a window of a
    few packets must not pay 256 ldexp calls."""
    out: list[float | None] = [
        math.ldexp(1.0, shift - (e - EXP_BIAS)) if shift - (e - EXP_BIAS) <= _F32_MAX_EXP
        else None for e in range(256)]
    out[EXP_ZERO] = 0.0
    return tuple(out)


@functools.lru_cache(maxsize=16)
def _template(prefix: bytes, job_id: int, w: int, k: int, workers: int, length: int) -> bytes:
    """The rows of a window before its first launch: per slot the prefix, the header's fixed
    fields and zero values.  Kept for the last few shapes of call: a Worker's calls of one
    size (a benchmark, a training bucket) pay one copy instead of w header packs (~1-2 us
    each, ~0.4 ms at 256 slots)."""
    stride = len(prefix) + HEADER_BYTES + 4 * k
    buf = bytearray(w * stride)
    pack, hr = wire.pack, len(prefix)
    for i in range(w):
        at = i * stride
        buf[at:at + hr] = prefix
        buf[at + hr:at + hr + HEADER_BYTES] = pack(
            msg_type=MsgType.DATA, job_id=job_id, slot=i, workers=workers, klog2=klog2(k),
            length=length)
    return bytes(buf)


class TxWindow:
    """The frames of one call's `w` slots over the (nb, k) float32 blocks `rows`."""

    __slots__ = ("frames", "payloads", "buf", "values", "factors", "todo", "_rows", "_w",
                 "_tmp", "_tiny", "_shift", "_stride", "_flags", "_launch_at", "_launch",
                 "_factor_of", "_prefix_len", "_factor", "_value_rows", "_workers")

    def __init__(self, rows: np.ndarray, job_id: int, w: int, shift: int, prefix: bytes, *,
                 workers: int = 0, length: int = 0) -> None:
        nb, k = rows.shape
        size = HEADER_BYTES + 4 * k
        hr = len(prefix)
        self._stride = stride = hr + size
        self._prefix_len = hr
        # every row's fixed bytes and zero values: one copy of the call's template
        self.buf = bytearray(_template(prefix, job_id, w, k, workers, length))
        mv = memoryview(self.buf)
        #: per slot: the whole frame a transport sends / the netsum packet within it
        self.frames = [mv[i * stride:(i + 1) * stride] for i in range(w)]
        self.payloads = [mv[i * stride + hr:(i + 1) * stride] for i in range(w)]
        self._flags = hr + wire.field_offset("flags")
        self._launch_at, self._launch = wire.field_writer(("exp", "count", "round", "offset",
                                                           "workers", "dest", "reason"))
        self._launch_at += hr
        self._workers = workers
        self._rows = rows
        self._w = w
        self._shift = shift
        self._factor_of = _factors(shift)
        # The quantizer's arrays (values, factors, ...) are made by the first agree(): a
        # compiled core (workers/native.py) quantizes in C and never needs them, and making
        # them is a fifth of a one-packet call's set-up.
        self._factor: list[float] | None = None
        self._tiny: dict[int, int] = {}   # block -> agreed exponent, for the float64 path
        #: blocks launched since the last flush(), whose values are still to be written
        self.todo: list[int] = []

    def _arrays(self) -> list[float]:
        """Make the quantizer's arrays (see __init__); the per-block factors as floats."""
        nb, k = self._rows.shape
        w, hr = self._w, self._prefix_len
        raw = np.frombuffer(self.buf, dtype=np.uint8).reshape(w, self._stride)
        #: (w, k) big-endian int32: every slot's values, in the rows
        self.values = raw[:, hr + HEADER_BYTES:].view(">i4")
        self._value_rows = list(self.values)                          # views, made once
        self._tmp = np.empty((w, k), dtype=np.float32)
        #: per block: 2^(s-E) as float32 once the block's exponent E is agreed (0 for EXP_ZERO)
        self.factors = np.zeros((nb, 1), dtype=np.float32)
        self._factor = factor = [0.0] * nb   # the same as Python floats (for one block alone)
        return factor

    def agree(self, block: int, exp: int) -> None:
        """Block `block` will be quantized with the biased agreed exponent `exp`."""
        factor = self._factor
        if factor is None:
            factor = self._arrays()
        f = self._factor_of[exp]
        if f is None:
            self._tiny[block] = exp
        else:
            self.factors[block, 0] = factor[block] = f
            if self._tiny:       # a block agreed again (a speculative miss's retry)
                self._tiny.pop(block, None)

    def launch(self, i: int, exp: int, round_: int, offset: int, dest: int,
               flags: int = 0, qexp: int = EXP_ZERO) -> None:
        """Slot i's row carries a new use: `flags` (NONFINITE or 0: not a retransmission),
        the exponent proposal, its round, offset and dest, and `qexp` (byte 18, the `reason`
        field of a DATA: the exponent its values are quantized with, which the switch checks
        to be the same in every contribution of a round).  Values: `todo.append(block)` (or
        zeros, as the bootstrap rows are from allocation)."""
        at = i * self._stride
        self.buf[at + self._flags] = flags
        self._launch.pack_into(self.buf, at + self._launch_at, exp, 0, round_, offset,
                               self._workers, dest, qexp)

    def spill(self, i: int) -> int:
        """A copy of slot i's frame as it is now, appended to `frames` (and its packet to
        `payloads`): its index there.  Rare (see WorkerCore._keep); `unspill` drops them."""
        copy = memoryview(bytes(self.frames[i]))
        self.frames.append(copy)
        self.payloads.append(copy[self._prefix_len:])
        return len(self.frames) - 1

    def unspill(self) -> None:
        del self.frames[self._w:]
        del self.payloads[self._w:]

    def set_flag(self, i: int, flag: int) -> None:
        self.buf[i * self._stride + self._flags] |= flag

    def flush(self) -> None:
        """Quantize the blocks in `todo` into their slots' rows (block b is on slot b % w)."""
        todo = self.todo
        factor = self._factor
        if factor is None:
            factor = self._arrays()
        w, tmp = self._w, self._tmp
        n = len(todo)
        if n == 1:
            # One block (a batch of one result): views made once, numpy's least calls.
            b = todo[0]
            t = tmp[0]
            np.multiply(self._rows[b], factor[b], out=t)
            np.rint(t, out=t)
            self._value_rows[b % w][...] = t
            n = 0
        else:
            todo.sort()
        rows, factors, values = self._rows, self.factors, self.values
        i = 0
        while i < n:
            b0 = todo[i]
            s0 = b0 % w
            j = i + 1
            while j < n and todo[j] == b0 + (j - i) and s0 + (j - i) < w:
                j += 1
            m = j - i
            t = tmp[:m]
            np.multiply(rows[b0:b0 + m], factors[b0:b0 + m], out=t)
            np.rint(t, out=t)
            values[s0:s0 + m] = t      # exact: integers with |q| <= 2^30
            i = j
        if self._tiny:
            for b in todo:
                exp = self._tiny.get(b)
                if exp is not None:
                    at = (b % w) * self._stride + self._prefix_len + HEADER_BYTES
                    self.buf[at:at + 4 * rows.shape[1]] = quant.quantize_block(
                        rows[b], exp, self._shift)
        todo.clear()
