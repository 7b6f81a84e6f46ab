"""Block floating point quantization of float32 tensors to int32 (docs/quantization.md).

Owns: validating tensors (dtype, shape, finiteness), per-block exponent proposals, the scale
shift that keeps n-worker sums inside int32, quantizing with an agreed exponent, dequantizing
sums, and the documented error bound; and the quantizer's side of Inf/NaN (docs/quantization.md,
"Inf and NaN"): `sanitize` zeroes non-finite elements, so they take no part in any exponent,
and reports which blocks had them; `class_codes` / `apply_classes` are the per-element codes
of the mask round and gloo's answer rebuilt from their sum.  Everything is vectorised over whole tensors; the worker
core calls the same functions on single blocks.

Invariants (proved in docs/quantization.md, tested in tests/unit/test_quant.py):
  * proposal e of a block: the least integer with 2^e >= max|x|, clamped to [-126, 128]
    (biased: e + EXP_BIAS in 1..255; EXP_ZERO = 0 for an all-zero block);
  * with an agreed exponent E >= every worker's proposal and s = scale_shift(n),
    q = rint(x * 2^(s-E)) satisfies |q| <= 2^s and n * 2^s <= 2^31 - 1: no int32 overflow;
  * |2^(E-s) * sum(q) - sum(x)| <= n * 2^(E-s-1) before the final rounding to float32.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from netsum.wire import EXP_BIAS, EXP_ZERO, MAX_WORKERS
from netsum.workers.errors import NonFiniteError, QuantError, SumOverflowError

__all__ = [
    "EXP_MIN", "EXP_MAX", "INT32_MAX", "as_tensor", "num_blocks", "scale_shift",
    "block_exponents", "quantize", "quantize_block", "dequantize", "error_bound", "unbias",
    "blocks", "agreed_exponents", "zero_block_error", "Sanitized", "sanitize", "class_codes",
    "apply_classes",
    "CODE_POS_INF", "CODE_NEG_INF", "CODE_NAN", "CODE_RANGE", "CODE_FIELD",
]

INT32_MAX = (1 << 31) - 1
#: Unbiased exponent range carried by the 8-bit field (1..255).  2^128 exceeds every finite
#: float32 and 2^-126 is the smallest normal one, so clamping never breaks 2^e >= max|x|.
EXP_MIN = 1 - EXP_BIAS
EXP_MAX = 255 - EXP_BIAS
_F32_MAX = float(np.finfo(np.float32).max)
#: Elements per chunk of the whole-tensor passes: the temporaries stay in the CPU cache.
_CHUNK_ELEMENTS = 1 << 16


def as_tensor(tensor: object) -> np.ndarray:
    """The tensor as a flat, contiguous float32 array (a view when it already is one).
    float16/float32/float64 are accepted; a float64 value beyond float32 is an error."""
    flat = _flat(tensor)
    if flat.dtype == np.float64:
        big = np.abs(flat) > _F32_MAX
        if big.any():
            i = int(np.flatnonzero(big)[0])
            if np.isfinite(flat[i]):
                raise QuantError(f"tensor element at offset {i} is {float(flat[i])!r}, beyond "
                                 "the float32 range")
    return flat.astype(np.float32, copy=False)


def num_blocks(length: int, k: int) -> int:
    return -(-length // k)


def scale_shift(num_workers: int) -> int:
    """The largest s with num_workers * 2^s <= 2^31 - 1 (30 for 1 worker, 25 for 32)."""
    if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)) \
            or not 1 <= num_workers <= MAX_WORKERS:
        raise QuantError(f"number of workers must be 1..{MAX_WORKERS}, got {num_workers!r}")
    return (INT32_MAX // int(num_workers)).bit_length() - 1


def blocks(x: np.ndarray, k: int) -> np.ndarray:
    """(nb, k) view of x, zero-padded at the end (a copy only when len(x) % k != 0)."""
    nb = num_blocks(len(x), k)
    if len(x) == nb * k:
        return x.reshape(nb, k)
    padded = np.zeros(nb * k, dtype=x.dtype)
    padded[:len(x)] = x
    return padded.reshape(nb, k)


def _block_peaks(rows: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """max|x| per row of the (nb, k) array; NaN/Inf propagate.  A max along a short last axis
    pays numpy's per-row overhead (about 3x a copy); for short rows, transposing cache-sized
    chunks first makes the reduction run along long contiguous rows instead.  Rows of 128
    values and more are long enough as they are: cache-sized chunks of them directly (at
    K=256 about 15x faster than the transposed chunks of 4096 rows, which outgrow the cache)."""
    nb, k = rows.shape
    peak = np.empty(nb, dtype=np.float32)
    if k >= 128:
        step = max(1, _CHUNK_ELEMENTS // k)
        flat = np.empty((min(step, nb), k), dtype=np.float32)
        for start in range(0, nb, step):
            part = rows[start:start + step]
            np.abs(part, out=flat[:len(part)])
            np.max(flat[:len(part)], axis=1, out=peak[start:start + len(part)])
        return peak
    tmp = np.empty((k, min(chunk, nb)), dtype=np.float32)
    for start in range(0, nb, chunk):
        part = rows[start:start + chunk]
        view = tmp[:, :len(part)]
        np.abs(part.T, out=view)
        np.max(view, axis=0, out=peak[start:start + len(part)])
    return peak


def block_exponents(x: np.ndarray, k: int) -> np.ndarray:
    """Biased exponent proposal (uint8) per block of k elements of the float32 array x.
    Raises NonFiniteError naming the first NaN/Inf element."""
    rows = blocks(x, k)
    peak = _block_peaks(rows)
    bad = ~np.isfinite(peak)
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        row = rows[b]
        i = int(np.flatnonzero(~np.isfinite(row))[0])
        raise NonFiniteError(b * k + i, float(row[i]))
    mant, ex = np.frexp(peak.astype(np.float64))
    # peak = mant * 2^ex with mant in [0.5, 1): 2^ex > peak >= 2^(ex-1), equal only at 0.5.
    e = ex.astype(np.int64) - (mant == 0.5)
    biased = np.clip(e + EXP_BIAS, 1, 255).astype(np.uint8)
    biased[peak == 0] = EXP_ZERO
    return biased


def agreed_exponents(tensors: Sequence[np.ndarray], k: int) -> np.ndarray:
    """What the exponent agreement must produce for these workers' tensors (one per worker,
    same length): per block, the max of every worker's proposal.  The bound a check applies
    follows from the inputs this way, never from the exponents a switch returned."""
    if not tensors:
        raise QuantError("no tensors")
    agreed: np.ndarray | None = None
    for x in tensors:
        props = block_exponents(as_tensor(x), k)
        if agreed is None:
            agreed = props
        elif props.shape != agreed.shape:
            raise QuantError(f"tensors of {len(agreed)} and {len(props)} blocks: every worker's "
                             "tensor must have the same length")
        else:
            np.maximum(agreed, props, out=agreed)
    assert agreed is not None
    return agreed


def unbias(exps: np.ndarray) -> np.ndarray:
    return np.asarray(exps, dtype=np.int64) - EXP_BIAS


def quantize(x: np.ndarray, agreed: np.ndarray, num_workers: int, k: int,
             proposals: np.ndarray | None = None, out: np.ndarray | None = None,
             chunk: int = 4096) -> np.ndarray:
    """Quantize float32 x (one or more whole blocks, the last zero-padded) with the agreed
    biased exponents -> (nb, k) int32.  `proposals`, when given, are this worker's own block
    exponents; an agreed exponent below one of them is a protocol error (it could overflow).
    `out`, an (nb, k) integer array or view (e.g. the values of an encoded batch, big-endian),
    receives the integers directly and is returned: one pass less than encoding afterwards."""
    s = scale_shift(num_workers)
    rows = blocks(np.asarray(x, dtype=np.float32), k)
    agreed = np.asarray(agreed)
    if agreed.shape != (len(rows),):
        raise QuantError(f"{len(rows)} blocks but {agreed.shape} agreed exponents")
    if proposals is not None and (agreed < proposals).any():
        b = int(np.flatnonzero(agreed < proposals)[0])
        raise QuantError(f"block {b}: agreed exponent {int(agreed[b])} is below this worker's "
                         f"proposal {int(proposals[b])} (exponent agreement is broken)")
    if out is not None and (out.shape != rows.shape or out.dtype.kind != "i"
                            or out.dtype.itemsize != 4):
        raise QuantError(f"out must be an int32 array of shape {rows.shape}, got "
                         f"{out.dtype} {out.shape}")
    zero = agreed == EXP_ZERO
    d = s - unbias(np.where(zero, EXP_BIAS, agreed))
    # Multiplying float32 by a power of two is exact (products that underflow are < 2^-126 and
    # round to 0 either way) and rint of a float32 is exact, so float32 arithmetic gives the
    # correctly rounded integer.  2^d must itself be a float32: d <= 127, else split in two.
    d1 = np.minimum(d, 127)
    f1 = np.ldexp(np.float32(1), d1.astype(np.int32)).astype(np.float32)
    f1[zero] = 0
    f2 = np.ldexp(np.float32(1), (d - d1).astype(np.int32)).astype(np.float32)
    split = bool((d > d1).any())
    if out is None:
        out = np.empty(rows.shape, dtype=np.int32)
    # Cache-sized chunks: the float32 temporary stays in cache between the three passes.
    tmp = np.empty((min(chunk, len(rows)), rows.shape[1]), dtype=np.float32)
    for start in range(0, len(rows), chunk):
        stop = min(start + chunk, len(rows))
        q = tmp[:stop - start]
        np.multiply(rows[start:stop], f1[start:stop, None], out=q)
        if split:
            np.multiply(q, f2[start:stop, None], out=q)
        np.rint(q, out=q)
        np.copyto(out[start:stop], q, casting="unsafe")  # exact: integers with |q| <= 2^30
    return out


def quantize_block(row: np.ndarray, agreed: int, shift: int) -> bytes:
    """One block (float32, length k) quantized with the biased agreed exponent, as K big-endian
    int32 bytes: the worker core's per-packet path.  Same integers as `quantize` (float64 holds
    x * 2^d exactly for every float32 x and every d the exponent field allows)."""
    if agreed == EXP_ZERO:
        return bytes(4 * len(row))
    factor = math.ldexp(1.0, shift - (agreed - EXP_BIAS))
    return np.rint(row.astype(np.float64) * factor).astype(">i4").tobytes()


def zero_block_error(block: int) -> QuantError:
    """The error of a result whose block came back with agreed exponent 0 (every rank's block
    all zero) but nonzero sums: the switch's answer is not a sum of these tensors."""
    return QuantError(f"block {block} has agreed exponent 0 (all zero) but nonzero sums")


def dequantize(sums: np.ndarray, agreed: np.ndarray, num_workers: int, length: int) -> np.ndarray:
    """float32 tensor of `length` elements from (nb, k) int sums (any integer dtype and byte
    order) and their agreed exponents."""
    s = scale_shift(num_workers)
    sums = np.asarray(sums)
    agreed = np.asarray(agreed)
    if sums.ndim != 2 or agreed.shape != (sums.shape[0],):
        raise QuantError(f"sums {sums.shape} and exponents {agreed.shape} do not match")
    if length > sums.size:
        raise QuantError(f"{length} elements asked from {sums.size} sums")
    zero = agreed == EXP_ZERO
    if (sums[zero] != 0).any():
        b = int(np.flatnonzero(zero & (sums != 0).any(axis=1))[0])
        raise zero_block_error(b)
    # int32 times a power of two is exact in float64 (31-bit integer, exponent within range);
    # float64 -> float32 then rounds once, as astype does.  Cache-sized chunks: the float64
    # temporary never leaves the cache (one pass over memory instead of four).
    factor = np.ldexp(1.0, (unbias(np.where(zero, EXP_BIAS, agreed)) - s).astype(np.int32))
    nb, k = sums.shape
    out = np.empty((nb, k), dtype=np.float32)
    step = max(1, _CHUNK_ELEMENTS // k)
    tmp = np.empty((min(step, nb), k))
    with np.errstate(over="ignore"):
        for start in range(0, nb, step):
            stop = min(start + step, nb)
            wide = tmp[:stop - start]
            np.multiply(sums[start:stop], factor[start:stop, None], out=wide)
            np.copyto(out[start:stop], wide, casting="same_kind")
    flat = out.reshape(-1)[:length]
    over = np.isinf(flat)
    if over.any():
        i = int(np.flatnonzero(over)[0])
        raise SumOverflowError(i, float(sums.reshape(-1)[i]) * float(factor[i // k]))
    return flat


def error_bound(agreed: np.ndarray, num_workers: int, k: int, length: int) -> np.ndarray:
    """Per-element bound on |2^(E-s)*sum(q) - sum(x)| (float64, before rounding to float32):
    num_workers * 2^(E-s-1), 0 for all-zero blocks."""
    s = scale_shift(num_workers)
    agreed = np.asarray(agreed)
    bound = num_workers * np.ldexp(1.0, (unbias(agreed) - s - 1).astype(np.int32))
    bound[agreed == EXP_ZERO] = 0.0
    return np.repeat(bound, k)[:length]


# -- Inf and NaN (docs/quantization.md, "Inf and NaN") ---------------------------------------
#: Per-element class codes of the mask round, one 6-bit field per class: a rank's code is one
#: of them (or 0), so the sum over n <= 32 ranks counts each class in its own field without a
#: carry, and stays below 2^24 (32 * 266305): exact in float32, and exactly quantized (a
#: code's exponent is at most 18 and every shift s >= 25, so x * 2^(s-E) is an integer).
CODE_FIELD = 64
CODE_POS_INF = 1
CODE_NEG_INF = CODE_FIELD
CODE_NAN = CODE_FIELD ** 2
#: A float64 element beyond float32's range: carried like the others so every rank raises
#: the same error at once (none waits for a peer that gave up).
CODE_RANGE = CODE_FIELD ** 3


@dataclass(frozen=True, slots=True)
class Sanitized:
    """A tensor as the switch may carry it: `values` (float32, flat) with every element that
    has no float32 value -- NaN, +/-Inf, a float64 beyond float32's range -- set to 0, so that
    it takes no part in its block's exponent; `blocks` (bool, one per block of k) says which
    blocks had such an element (the DATA's NONFINITE flag); `count` how many elements."""
    values: np.ndarray
    blocks: np.ndarray
    count: int


def _flat(tensor: object) -> np.ndarray:
    arr = np.asarray(tensor)
    if arr.dtype.kind != "f" or arr.dtype.itemsize not in (2, 4, 8):
        raise QuantError(f"tensor must be float16/float32/float64, got dtype {arr.dtype}")
    if arr.size == 0:
        raise QuantError("tensor is empty: nothing to aggregate")
    if arr.size >= 1 << 32:
        raise QuantError(f"tensor has {arr.size} elements; offsets are 32-bit (max 2^32 - 1)")
    return np.ascontiguousarray(arr.reshape(-1))


def _unrepresentable(flat: np.ndarray) -> np.ndarray:
    """Bool per element: no float32 value (NaN, Inf, or a float64 beyond float32's range)."""
    if flat.dtype == np.float64:
        with np.errstate(invalid="ignore"):
            return ~(np.abs(flat) <= _F32_MAX)
    return ~np.isfinite(flat)


def sanitize(tensor: object, k: int) -> Sanitized:
    """See `Sanitized`.  A finite float32 tensor comes back as is (a view: no copy)."""
    flat = _flat(tensor)
    bad = _unrepresentable(flat)
    if not bad.any():
        values = flat.astype(np.float32, copy=False)
        return Sanitized(values, np.zeros(num_blocks(len(flat), k), dtype=bool), 0)
    values = np.where(bad, 0.0, flat).astype(np.float32)
    flags: np.ndarray = np.asarray(blocks(bad, k).any(axis=1))
    return Sanitized(values, flags, int(bad.sum()))


def class_codes(tensor: object) -> np.ndarray:
    """float32 per element: CODE_POS_INF, CODE_NEG_INF, CODE_NAN, CODE_RANGE or 0 (a value
    float32 holds)."""
    flat = _flat(tensor)
    codes = np.zeros(len(flat), dtype=np.float32)
    bad = _unrepresentable(flat)
    if bad.any():
        x = flat[bad]
        cls = np.full(len(x), CODE_RANGE, dtype=np.float32)
        cls[np.isnan(x)] = CODE_NAN
        cls[x == np.inf] = CODE_POS_INF
        cls[x == -np.inf] = CODE_NEG_INF
        codes[bad] = cls
    return codes


def apply_classes(sums: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """gloo's answer per element, from the finite sums and the sum of every rank's class code:
    NaN where any rank had NaN or the ranks had both infinities, else +Inf / -Inf where a rank
    had one, else the finite sum.  A float64 beyond float32's range on any rank raises
    QuantError (the same on every rank: they all hold the same code sums)."""
    sums = np.asarray(sums, dtype=np.float32)
    total = np.rint(np.asarray(codes, dtype=np.float64)).astype(np.int64)
    if total.shape != sums.shape:
        raise QuantError(f"{sums.shape} sums but {total.shape} class codes")
    if (total < 0).any() or (total >= CODE_FIELD ** 4).any():
        raise QuantError("class code sums out of range: the mask round was not summed "
                         "from class codes")
    pos = total % CODE_FIELD
    neg = total // CODE_NEG_INF % CODE_FIELD
    nan = total // CODE_NAN % CODE_FIELD
    big = total // CODE_RANGE
    if big.any():
        i = int(np.flatnonzero(big)[0])
        raise QuantError(f"tensor element at offset {i} is a float64 beyond float32's range "
                         f"on {int(big[i])} rank(s): the switch sums float32 block floating "
                         "point")
    out = sums.copy()
    out[pos > 0] = np.inf
    out[neg > 0] = -np.inf
    out[(nan > 0) | ((pos > 0) & (neg > 0))] = np.nan
    return out
