"""What a job's integer sums must be, from its inputs alone (docs/quantization.md's formulas,
computed here without the workers' quantizer), and a check of every RESULT a switch sends
against them: the expectation of the tests that push a job through a hostile network.

A block's agreed exponent is the max over workers of the least e with 2^e >= max|x|; the
quantized inputs are q = rint(x * 2^(s - E)) with s the largest shift whose n-fold sum fits
int32; a block's sum is their integer sum, and each worker's result that sum dequantized.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

import numpy as np

from netsum.wire import HEADER_BYTES
from netsum.workers import wire

__all__ = ["spread_inputs", "shift", "speculated", "expected_sums", "dequantized",
           "reference_results", "ResultCheck"]

_NETSUM_AT = 14 + 20 + 8
_HEADER = HEADER_BYTES
_READ = wire.field_reader(("msg_type", "slot", "count", "round", "offset"))


def spread_inputs(seed: int, n: int, length: int, decades: float) -> list[np.ndarray]:
    """n float32 tensors of `length` normal values, each scaled by its own 10^u (u uniform in
    +-decades: ranks whose blocks agree on different exponents), a tenth of them zero."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = rng.standard_normal(length) * 10.0 ** rng.uniform(-decades, decades)
        x[rng.random(length) < 0.1] = 0.0
        out.append(x.astype(np.float32))
    return out


def shift(workers: int) -> int:
    """s with workers * 2^s <= 2^31 - 1."""
    return (((1 << 31) - 1) // workers).bit_length() - 1


def speculated(maxima: np.ndarray, predict: np.ndarray, slack: int) -> np.ndarray:
    """The exponents blocks are quantized with when each rank sends block b first with the
    prediction P_b (docs/quantization.md, "Speculative exponents"): P_b where the max M_b of
    the proposals is at most P_b and P_b at most M_b + slack (a hit), EXP_ZERO (0) where every
    block is zero, M_b otherwise (the block sent again with M_b)."""
    m = maxima.astype(int)
    p = predict.astype(int)
    used = np.where((m <= p) & (p <= m + slack), p, m)
    return np.where(m == 0, 0, used).astype(np.uint8)


def expected_sums(xs: list[np.ndarray], k: int, predict: np.ndarray | None = None,
                  slack: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(the biased exponents used, int32 sums) per block of k elements: the max of every
    worker's proposal, or with predictions the exponents `speculated` gives."""
    blocks = xs[0].size // k
    rows = [x.astype(np.float64).reshape(blocks, k) for x in xs]
    peak = np.max([np.abs(r).max(axis=1) for r in rows], axis=0)
    e = np.array([math.frexp(p)[1] - (math.frexp(p)[0] == 0.5) if p else 0 for p in peak])
    biased = np.where(peak > 0, np.clip(e + 127, 1, 255), 0)
    if predict is not None:
        biased = speculated(biased, np.asarray(predict), slack).astype(int)
    s = shift(len(xs))
    scale = np.where(biased > 0, np.ldexp(1.0, (s - (biased - 127)).astype(int)), 0.0)
    total = np.sum([np.rint(r * scale[:, None]).astype(np.int64) for r in rows], axis=0)
    assert np.abs(total).max() <= (1 << 31) - 1
    return biased.astype(np.uint8), total.astype(np.int32)


def dequantized(agreed: np.ndarray, sums: np.ndarray, workers: int) -> np.ndarray:
    """Every worker's result, bit for bit: the sums scaled back, as float32."""
    factor = np.where(agreed > 0, np.ldexp(1.0, agreed.astype(int) - 127 - shift(workers)), 0.0)
    return (sums.astype(np.float64) * factor[:, None]).reshape(-1).astype(np.float32)


def reference_results(xs: list[np.ndarray], k: int, predict: np.ndarray | None = None,
                      slack: int = 0) -> np.ndarray:
    """Every worker's result from the inputs alone, bit for bit: the inputs (flattened, as
    float32) padded with zeros to whole blocks of k, summed as integers and dequantized, cut
    back to the inputs' length (with predictions: quantized as `speculated` says)."""
    length = xs[0].size
    pad = np.zeros(-length % k, np.float32)
    padded = [np.concatenate([x.reshape(-1).astype(np.float32), pad]) for x in xs]
    agreed, sums = expected_sums(padded, k, predict, slack)
    return dequantized(agreed, sums, len(xs))[:length]


@dataclass
class ResultCheck:
    """Call with every netsum RESULT (or STATUS, or REJECT) frame a switch sends (slot `slot`
    of round r >= 1 holds block slot + (r - 1) * slots; round 0 is the bootstrap use, all
    zeros); `bad` lists the wrong ones, `checked` counts them by kind.  A REJECT (a member's
    frame the switch refused; the fuzz test sends such frames from members' ports) carries no
    sums: it must be the header alone."""
    sums: np.ndarray
    slots: int
    k: int
    checked: dict[str, int] = field(default_factory=lambda: {"bootstrap": 0, "data": 0,
                                                             "status": 0, "reject": 0})
    bad: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._want = [s.astype(">i4").tobytes() for s in self.sums]
        self._zeros = bytes(4 * self.k)

    def __call__(self, frame: bytes) -> None:
        msg, slot, count, rnd, off = _READ(memoryview(frame)[_NETSUM_AT:])
        values = frame[_NETSUM_AT + _HEADER:]
        if msg == 4:
            udp_len = struct.unpack_from("!H", frame, _NETSUM_AT - 4)[0]
            self.checked["reject"] += 1
            if udp_len != 8 + _HEADER:
                self.bad.append(f"slot {slot} round {rnd}: a REJECT with values")
            return
        if msg == 3:
            # A STATUS (a member re-sent DATA for a slot still missing contributions): no
            # sums, but value[0] is the bitmap of the `count` members that contributed.
            bitmap = int.from_bytes(values[:4], "big")
            self.checked["status"] += 1
            if not 0 < count == bin(bitmap).count("1"):
                self.bad.append(f"slot {slot} round {rnd}: STATUS count {count} but bitmap "
                                f"{bitmap:#b}")
            return
        if msg != 2:
            self.bad.append(f"not a RESULT: msg_type {msg}")
            return
        if rnd == 0:
            ok, kind = values == self._zeros and off == slot * self.k, "bootstrap"
        else:
            block = slot + (rnd - 1) * self.slots
            ok = block < len(self._want) and off == block * self.k and \
                values == self._want[block]
            kind = "data"
        self.checked[kind] += 1
        if not ok:
            self.bad.append(f"slot {slot} round {rnd} offset {off}: wrong RESULT")

