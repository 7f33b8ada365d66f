"""The seed's data and model, exactly as the seed builds them."""

from __future__ import annotations

import torch

from trainspeed.workloads import load_iris_split, make_iris_mlp


def test_split_and_scaling() -> None:
    d = load_iris_split()
    assert d.x_train.shape == (120, 4) and d.x_test.shape == (30, 4)
    assert d.y_train.dtype == torch.int64 and d.x_train.dtype == torch.float32
    assert torch.allclose(d.x_train.min(0).values, torch.zeros(4))
    assert torch.allclose(d.x_train.max(0).values, torch.ones(4))


def test_model_shape_and_deterministic_init() -> None:
    a, b = make_iris_mlp(seed=0), make_iris_mlp(seed=0)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert a(torch.zeros(5, 4)).shape == (5, 3)
    assert sum(p.numel() for p in a.parameters()) == 4 * 10 + 10 + 10 * 3 + 3


def test_model_init_leaves_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    make_iris_mlp(seed=0)
    assert torch.equal(torch.rand(3), expected)
