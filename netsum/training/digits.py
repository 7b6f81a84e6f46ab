"""The data and model of the digits example: scikit-learn's 8x8 handwritten digits (shipped
inside scikit-learn, no download) and a small CNN.

The split and each rank's batches depend only on the seed, the rank and the world size, so a
run through the switch and a run with gloo see exactly the same samples in the same order.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

__all__ = ["Digits", "load_digits_split", "DigitsCNN", "batches", "accuracy"]


@dataclass(frozen=True, slots=True)
class Digits:
    x_train: torch.Tensor    # (n, 1, 8, 8) float32 in [0, 1]
    y_train: torch.Tensor    # (n,) int64
    x_test: torch.Tensor
    y_test: torch.Tensor


def load_digits_split(seed: int = 0, test_fraction: float = 0.2) -> Digits:
    from sklearn.datasets import load_digits
    data = load_digits()
    x = (np.asarray(data.data, dtype=np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = np.asarray(data.target, dtype=np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return Digits(torch.from_numpy(x[train]), torch.from_numpy(y[train]),
                  torch.from_numpy(x[test]), torch.from_numpy(y[test]))


class DigitsCNN(nn.Module):
    """conv(1->w) pool conv(w->2w) pool fc(8w->4w) fc(4w->10); w=8: 3,658 parameters."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        w = width
        self.features = nn.Sequential(
            nn.Conv2d(1, w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),        # w x 4 x 4
            nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))    # 2w x 2 x 2
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8 * w, 4 * w), nn.ReLU(),
                                  nn.Linear(4 * w, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.features(x))
        return out


def batches(n: int, batch: int, rank: int, world: int, seed: int) -> Iterator[np.ndarray]:
    """Endless index batches of this rank's shard (every world-th sample), reshuffled per
    epoch with a seed shared by all ranks and runs."""
    shard = np.arange(rank, n, world)
    if not 1 <= batch <= len(shard):
        raise ValueError(f"batch {batch} per rank: rank {rank}'s shard has {len(shard)} samples "
                         f"({n} over {world} ranks)")
    epoch = 0
    while True:
        order = np.random.default_rng([seed, epoch]).permutation(len(shard))
        for i in range(0, len(order) - batch + 1, batch):
            yield shard[order[i:i + batch]]
        epoch += 1


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    try:
        pred = model(x).argmax(dim=1)
    finally:
        model.train()
    return float((pred == y).float().mean())
