"""The loss a memory estimate trains on, chosen from the output where none is given."""

from __future__ import annotations

import torch

from trainspeed.memory.losses import ChosenLoss, cross_entropy, mse


def test_the_chosen_loss_follows_the_outputs_shape() -> None:
    choose = ChosenLoss(input_shape=(64,)).choose
    assert choose((), 0) == "mean"  # a model that returns its own loss
    assert choose((10,), 2) == "cross-entropy"  # a classifier's (N, C)
    assert choose((64, 1000), 3) == "cross-entropy"  # a language model's (N, T, V)
    assert choose((64,), 2) == "mse"  # shaped like the input: an autoencoder
    assert choose((1,), 2) == "mse" and choose((), 1) == "mse"  # one value a sample


def test_named_losses_backward_to_the_output() -> None:
    out = torch.randn(4, 7, 11, requires_grad=True)
    for fn in (cross_entropy, mse):
        out.grad = None
        fn(out).backward()
        assert out.grad is not None and out.grad.shape == out.shape
