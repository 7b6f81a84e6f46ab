"""netsum.training.models: the experiments' models have the parameter counts the docs give
(worked out by hand from the layer shapes), take the digits' images, and the synthetic set is
the same for every rank and run with the same seed."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the `train` extra)")

from netsum.training.models import make_model, param_count, synthetic  # noqa: E402


def _mlp(h: int) -> int:
    return (64 * h + h) + (h * h + h) + (h * 10 + 10)


def _transformer(d: int = 128, layers: int = 6, ff: int = 512) -> int:
    attention = (3 * d * d + 3 * d) + (d * d + d)          # in and out projections
    feed_forward = (d * ff + ff) + (ff * d + d)
    per_layer = attention + feed_forward + 2 * 2 * d       # two LayerNorms
    return (8 * d + d) + 8 * d + layers * per_layer + 2 * d + (d * 10 + 10)


@pytest.mark.parametrize(("name", "width", "want"), [
    ("mlp", 0, 301_066), ("mlp", 256, 85_002), ("transformer", 0, 1_193_354), ("cnn", 0, 3_658)])
def test_parameter_counts_as_documented(name: str, width: int, want: int) -> None:
    hand = {"mlp": _mlp(width or 512), "transformer": _transformer(), "cnn": want}[name]
    assert hand == want
    model = make_model(name, width)
    assert param_count(model) == want
    assert model(torch.zeros(3, 1, 8, 8)).shape == (3, 10)


def test_unknown_model_is_named() -> None:
    with pytest.raises(ValueError, match="unknown model 'resnet'"):
        make_model("resnet")


def test_synthetic_is_deterministic_and_learnable_shaped() -> None:
    a, b, c = synthetic(512, seed=1), synthetic(512, seed=1), synthetic(512, seed=2)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    assert not torch.equal(a.x_train, c.x_train)
    assert a.x_train.shape == (512, 1, 8, 8) and a.x_test.shape == (2048, 1, 8, 8)
    # The teacher uses every class: no constant labels that any model would fit at once.
    assert len(set(a.y_train.tolist())) == 10
