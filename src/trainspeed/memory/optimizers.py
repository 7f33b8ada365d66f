"""Optimizers by name, built the same way for the estimate and for the measured run."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

OptimizerFactory = Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]

# lr values are ordinary defaults; they do not change memory.
_BUILDERS: dict[str, Callable[[Iterable[torch.nn.Parameter], bool], torch.optim.Optimizer]] = {
    "sgd": lambda p, fe: torch.optim.SGD(p, lr=0.01, foreach=fe),
    "sgd-momentum": lambda p, fe: torch.optim.SGD(p, lr=0.01, momentum=0.9, foreach=fe),
    "adam": lambda p, fe: torch.optim.Adam(p, lr=1e-3, foreach=fe),
    "adamw": lambda p, fe: torch.optim.AdamW(p, lr=1e-3, foreach=fe),
    "rmsprop": lambda p, fe: torch.optim.RMSprop(p, lr=1e-3, foreach=fe),
    "adagrad": lambda p, fe: torch.optim.Adagrad(p, lr=1e-2, foreach=fe),
}
OPTIMIZER_NAMES = tuple(_BUILDERS)


def optimizer_factory(optimizer: str | OptimizerFactory, device_type: str) -> tuple[str, OptimizerFactory]:
    """(name, factory). Named optimizers fix `foreach` to what PyTorch picks on that device
    (foreach on CUDA, a per-tensor loop on CPU), so fake and real runs take the same path."""
    if callable(optimizer):
        return getattr(optimizer, "__name__", "custom"), optimizer
    name = optimizer.lower()
    if name not in _BUILDERS:
        raise ValueError(f"unknown optimizer {optimizer!r} (choose from {', '.join(OPTIMIZER_NAMES)})")
    foreach = device_type == "cuda"
    build = _BUILDERS[name]
    return name, lambda params: build(params, foreach)
