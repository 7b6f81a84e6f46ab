"""Seeds and sizes of the fuzz tests, from the environment, so every run can be repeated.

    NETSUM_FUZZ_SEED=N      the seed (default: a fixed one per test, so CI runs are repeatable)
    NETSUM_FUZZ_SCALE=X     multiply every fuzz test's case count by X (default 1)

Each fuzz test prints its seed and case count; a failure names the case's index, so
`NETSUM_FUZZ_SEED=<seed>` and the same scale regenerate exactly that case.
"""
from __future__ import annotations

import os
import random

__all__ = ["fuzz_rng", "fuzz_count"]


def fuzz_rng(name: str, default_seed: int) -> tuple[random.Random, int]:
    """(generator, seed) for the fuzz test `name`; the seed is printed."""
    seed = int(os.environ.get("NETSUM_FUZZ_SEED", default_seed))
    print(f"{name}: seed {seed} (repeat with NETSUM_FUZZ_SEED={seed})")
    return random.Random(seed), seed


def fuzz_count(default: int) -> int:
    return max(1, round(default * float(os.environ.get("NETSUM_FUZZ_SCALE", "1"))))
