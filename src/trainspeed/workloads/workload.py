"""`trainspeed.Workload`: what a sweep trains, as factories, so every arm starts from the same state."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


def default_loss() -> Callable[..., torch.Tensor]:
    return nn.CrossEntropyLoss()


def sgd(params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.01)


@dataclass
class Workload:
    """A training job as factories.

    `model()` returns a fresh nn.Module (same initial weights on every call is up to the
    factory; the built-ins seed themselves). `data()` returns either a tuple of tensors whose
    first dimension counts samples (inputs first, target last) or a map-style Dataset whose
    items are (inputs..., target) tuples. `loss()` returns the loss function, called as
    `loss(model(*inputs), target)`. `optimizer(params)` builds the optimizer.
    `batch_size` None means the whole data set per step (full batch, as the seed does).
    """

    name: str
    model: Callable[[], nn.Module]
    data: Callable[[], Any]
    loss: Callable[[], Callable[..., torch.Tensor]] = default_loss
    optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer] = sgd
    batch_size: int | None = None
    params: dict[str, int] = field(default_factory=dict)
    """The size parameters a built-in was made with (width, batch, ...), for the record."""
    description: str = ""


def data_length(data: Any) -> int:
    """Number of samples in a workload's data (tensors or a Dataset)."""
    if isinstance(data, tuple):
        return int(data[0].shape[0])
    return len(data)
