"""The seed's job and the plain loop `fit` is compared against."""

from __future__ import annotations

import torch
from torch import nn

from trainspeed.workloads.iris import make_iris_mlp


def plain_loop(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               epochs: int, loss_fn: nn.Module | None = None) -> list[float]:
    """The seed's loop: full batch, the loss read every epoch."""
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    losses = []
    for _ in range(epochs):
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def seed_job(lr: float = 0.01) -> tuple[nn.Module, torch.optim.Optimizer]:
    model = make_iris_mlp(0)
    return model, torch.optim.SGD(model.parameters(), lr=lr)
