"""Inf and NaN through the switch: which blocks need the mask round, what it sends, and the
result rebuilt from it (torch-free; docs/quantization.md, "Inf and NaN").

gloo sums Inf and NaN like any value, and mixed-precision training relies on it: a rank whose
gradient overflowed makes every rank's sum Inf/NaN in the same elements, so GradScaler skips
the step everywhere.  The switch sums integers, so netsum carries Inf/NaN beside the sum:

1. The quantizer zeroes each rank's non-finite elements (they take no part in any exponent)
   and flags the blocks that had one (`quant.sanitize`).
2. The OR of the flags over the ranks comes back with the result, through a *carrier*:
   - `ExponentSentinel` (the v1 wire, today): a flagged block carries 2^122 in place of its
     first non-finite element, so its exponent proposal is at least 122; the switch's max
     gives every rank an agreed exponent >= 122 for that block.  Legitimate values above 2^121
     flag their block too, harmlessly (the mask round sums it again, exactly as a normal
     block).  Nothing is added to a tensor without Inf/NaN: no packet, no value.
   - `HeaderFlag` (protocol v2, /work/notes/protocol-v2.md): the DATA's NONFINITE flag, ORed by
     the switch into the RESULT.  Used as soon as the worker core offers it: `WorkerCore(...,
     nonfinite=<bool per block>)` (the caller zeroes those elements) and `AllreduceResult.flags`
     (the RESULT's flags per block; NONFINITE = 0x02).
3. Every rank sees the same flagged blocks (they come from the switch's one answer), so every
   rank runs the *mask round* -- a second all-reduce on the same lane, right after the first --
   with the same length: the flagged blocks' class codes (`quant.class_codes`), preceded,
   with the sentinel, by the flagged blocks' finite values again (the first round's sums of
   those blocks are lost to the sentinel's exponent).
4. `rebuild` puts gloo's answer together per element (`quant.apply_classes`): NaN if any NaN
   or both infinities, else +/-Inf, else the finite sum.

No rank fails or waits because a peer saw a NaN: the peers' calls have the same length and
the same number of rounds.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from netsum.wire import EXP_BIAS, Flags
from netsum.workers import WorkerCore, quant
from netsum.workers.quant import Sanitized

__all__ = ["SENTINEL_E", "NONFINITE", "Carrier", "ExponentSentinel", "HeaderFlag", "default_carrier",
           "mask_round", "rebuild", "flagged_from_exponents"]

#: The sentinel's exponent: 2^122 keeps n * 2^122 finite in float32 for every n <= 32, so the
#: first round's (discarded) sums never overflow.
SENTINEL_E = 122
_SENTINEL = np.float32(2.0 ** SENTINEL_E)
_SENTINEL_BIASED = SENTINEL_E + EXP_BIAS
#: The v2 header's NONFINITE bit (0x02 in protocol-v2.md; the v1 wire has no such flag).
NONFINITE = int(getattr(Flags, "NONFINITE", 0x02))


class Carrier(Protocol):
    """How the OR of the ranks' per-block flags comes back with the first round's result."""
    @property
    def name(self) -> str: ...

    @property
    def resend_values(self) -> bool:
        """Whether the mask round must carry the flagged blocks' finite values again."""

    def first_round(self, s: Sanitized, k: int) -> np.ndarray: ...

    def core_flags(self, s: Sanitized) -> np.ndarray | None: ...

    def flagged(self, exponents: np.ndarray, flags: np.ndarray | None) -> np.ndarray:
        """The flagged blocks, from the result's agreed exponents and per-block flags."""


def flagged_from_exponents(exponents: np.ndarray) -> np.ndarray:
    """Blocks whose agreed (biased) exponent says some rank put the sentinel there."""
    return np.flatnonzero(np.asarray(exponents) >= _SENTINEL_BIASED)


@dataclass(frozen=True, slots=True)
class ExponentSentinel:
    name: str = "exponent sentinel"
    resend_values: bool = True

    def first_round(self, s: Sanitized, k: int) -> np.ndarray:
        """The values to send: `s.values` with the sentinel in each flagged block (a copy only
        when some block is flagged)."""
        if not s.count:
            return s.values
        n = len(s.values)
        out = np.zeros(len(s.blocks) * k, dtype=np.float32)
        out[:n] = s.values
        rows = out.reshape(-1, k)
        for b in np.flatnonzero(s.blocks):
            # The block's first zero: a real element (the zeroed one comes before any
            # padding), whose value the discarded first round need not carry.
            rows[b, np.flatnonzero(rows[b] == 0)[0]] = _SENTINEL
        return out[:n]

    def core_flags(self, s: Sanitized) -> np.ndarray | None:
        return None

    def flagged(self, exponents: np.ndarray, flags: np.ndarray | None) -> np.ndarray:
        return flagged_from_exponents(exponents)


@dataclass(frozen=True, slots=True)
class HeaderFlag:
    name: str = "NONFINITE header flag"
    resend_values: bool = False

    def first_round(self, s: Sanitized, k: int) -> np.ndarray:
        return s.values

    def core_flags(self, s: Sanitized) -> np.ndarray | None:
        return s.blocks

    def flagged(self, exponents: np.ndarray, flags: np.ndarray | None) -> np.ndarray:
        if flags is None or len(flags) != len(exponents):
            raise ValueError("the worker core returned no per-block RESULT flags")
        return np.flatnonzero(np.asarray(flags, dtype=np.int64) & NONFINITE)


def default_carrier() -> Carrier:
    """HeaderFlag once the wire has NONFINITE and the core takes per-block flags; until then
    the sentinel, which needs nothing of the wire."""
    if getattr(Flags, "NONFINITE", None) is not None and \
            "nonfinite" in inspect.signature(WorkerCore).parameters:
        return HeaderFlag()
    return ExponentSentinel()


def mask_round(s: Sanitized, codes: np.ndarray, flagged: np.ndarray, k: int,
               resend_values: bool) -> np.ndarray:
    """The mask round's tensor (float32): per flagged block, in block order, its finite values
    (when `resend_values`), then per flagged block its class codes; whole blocks of k, so no
    block mixes values and codes."""
    parts = []
    if resend_values:
        parts.append(quant.blocks(s.values, k)[flagged].reshape(-1))
    parts.append(quant.blocks(np.asarray(codes, dtype=np.float32), k)[flagged].reshape(-1))
    return np.concatenate(parts)


def rebuild(first: np.ndarray, second: np.ndarray, flagged: np.ndarray, k: int,
            resend_values: bool) -> np.ndarray:
    """gloo's answer (float32, len(first)): `first` (the first round's sums) with the flagged
    blocks rebuilt from the mask round's sums `second`."""
    length = len(first)
    nf = len(flagged)
    if len(second) != (2 if resend_values else 1) * nf * k:
        raise ValueError(f"the mask round returned {len(second)} values for {nf} flagged "
                         f"blocks of {k}")
    rows = quant.blocks(np.asarray(first, dtype=np.float32), k).copy()
    at = 0
    if resend_values:
        rows[flagged] = second[:nf * k].reshape(nf, k)
        at = nf * k
    codes = second[at:].reshape(nf, k)
    rows[flagged] = quant.apply_classes(rows[flagged].reshape(-1),
                                        codes.reshape(-1)).reshape(nf, k)
    return rows.reshape(-1)[:length]
