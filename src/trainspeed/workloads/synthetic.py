"""Sized synthetic workloads: an MLP, a CNN and a transformer whose width, depth and batch are
parameters, with random data drawn from a fixed seed (the same data for every arm)."""

from __future__ import annotations

import torch
from torch import nn

from trainspeed.workloads.zoo import ResNetCNN, TinyGPT


def seeded(seed: int, build):  # noqa: ANN001, ANN202 - a tiny helper around fork_rng
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def mlp_model(features: int, width: int, depth: int, classes: int) -> nn.Module:
    layers: list[nn.Module] = []
    size = features
    for _ in range(depth):
        layers += [nn.Linear(size, width), nn.ReLU()]
        size = width
    layers.append(nn.Linear(size, classes))
    return nn.Sequential(*layers)


def classification_data(samples: int, shape: tuple[int, ...], classes: int, seed: int = 1) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, *shape, generator=g)
    y = torch.randint(0, classes, (samples,), generator=g)
    return x, y


def token_data(samples: int, context: int, vocab: int, seed: int = 1) -> tuple[torch.Tensor, ...]:
    """Next-token prediction on random token ids: targets are the inputs shifted by one."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (samples, context + 1), generator=g)
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


class TokenLoss(nn.Module):
    """Cross-entropy over (B, T, vocab) logits and (B, T) targets."""

    def __init__(self) -> None:
        super().__init__()
        self.ce = nn.CrossEntropyLoss()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.ce(logits.flatten(0, 1), target.flatten())


def cnn_model(width: int, classes: int) -> nn.Module:
    return ResNetCNN(width=width, classes=classes)


def transformer_model(vocab: int, context: int, width: int, layers: int) -> nn.Module:
    heads = 4 if width % 4 == 0 else 1
    return TinyGPT(vocab=vocab, context=context, dim=width, heads=heads, layers=layers)
