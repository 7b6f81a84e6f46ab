"""Models of different communication-to-compute ratio for the training experiments, and a
synthetic data set for batches larger than the digits allow (torch only, no downloads).

Every model takes the digits' (batch, 1, 8, 8) images and returns 10 logits, so one data path
serves them all:

* `cnn`  -- netsum.training.digits.DigitsCNN: 3,658 parameters at width 8, little of either;
* `mlp`  -- parameter-heavy: 64 -> H -> H -> 10 (H = 512: 301,066 parameters, 1.2 MB of
  float32 gradient per step for 6 x 300k FLOPs per sample: communication-bound at small
  batches);
* `transformer` -- the image's 8 rows as 8 tokens of 8 pixels, a learned position embedding,
  L encoder layers (pre-norm, GELU), mean-pooled: d = 128, 6 layers, 4 heads, ff 512 gives
  1,193,354 parameters and ~8x the MLP's compute per parameter (8 tokens per sample).

`synthetic(n, seed)`: n samples of 64 standard-normal features (shaped 1x8x8) labelled by a
fixed random two-layer teacher, argmax over 10 classes -- learnable, any size, the same for
every rank and run with the same seed.
"""
from __future__ import annotations

import torch
from torch import nn

from netsum.training.digits import Digits, DigitsCNN

__all__ = ["MODELS", "MLP", "DigitsTransformer", "make_model", "synthetic", "param_count"]

MODELS = ("cnn", "mlp", "transformer")


class MLP(nn.Module):
    """64 -> hidden -> hidden -> 10 with ReLU: parameters grow as hidden^2."""

    def __init__(self, hidden: int = 512) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(),
                                      nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.features(x))
        return out


class DigitsTransformer(nn.Module):
    """Rows of the 8x8 image as 8 tokens; `layers` pre-norm encoder layers of width `d`."""

    def __init__(self, d: int = 128, layers: int = 6, heads: int = 4, ff: int = 512) -> None:
        super().__init__()
        self.embed = nn.Linear(8, d)
        self.pos = nn.Parameter(torch.zeros(1, 8, d))
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        # No nested-tensor fast path: it is inference-only and warns for norm_first.
        self.features = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(x.reshape(x.shape[0], 8, 8)) + self.pos
        out: torch.Tensor = self.head(self.features(tokens).mean(dim=1))
        return out


def make_model(name: str, width: int = 0) -> nn.Module:
    """`width`: the CNN's width (default 8), the MLP's hidden size (512), the transformer's
    d (128); 0 takes the default."""
    if name == "cnn":
        return DigitsCNN(width or 8)
    if name == "mlp":
        return MLP(width or 512)
    if name == "transformer":
        return DigitsTransformer(width or 128)
    raise ValueError(f"unknown model {name!r} (one of {', '.join(MODELS)})")


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def synthetic(n_train: int, seed: int = 0, n_test: int = 2048) -> Digits:
    """A labelled data set of any size in the digits' shape (module docstring)."""
    g = torch.Generator().manual_seed(1000 + seed)
    w1 = torch.randn(64, 32, generator=g)
    w2 = torch.randn(32, 10, generator=g)
    x = torch.randn(n_train + n_test, 1, 8, 8, generator=g)
    y = (torch.tanh(x.reshape(-1, 64) @ w1) @ w2).argmax(dim=1)
    return Digits(x[:n_train].contiguous(), y[:n_train].contiguous(),
                  x[n_train:].contiguous(), y[n_train:].contiguous())
