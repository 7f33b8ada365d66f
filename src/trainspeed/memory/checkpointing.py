"""Activation checkpointing applied to a model's blocks (the same way when estimating and measuring)."""

from __future__ import annotations

import functools
from typing import Any

from torch import nn
from torch.utils.checkpoint import checkpoint


def blocks_of(model: nn.Module) -> list[nn.Module]:
    """The repeated blocks, as training scripts checkpoint and shard them: the elements of every outermost
    nn.ModuleList in the model, however deep (a transformer's layers: Hugging Face's `model.model.layers`,
    nn.TransformerEncoder's `layers`); else the elements of Sequential containers among the model's children (or
    of the model itself if it is a Sequential); else every child with parameters."""
    lists: list[nn.ModuleList] = []

    def find(module: nn.Module) -> None:
        for child in module.children():
            if isinstance(child, nn.ModuleList):
                lists.append(child)
            else:
                find(child)

    find(model)
    if lists:
        return [block for blocks in lists for block in blocks]
    if isinstance(model, nn.Sequential):
        return list(model)
    found: list[nn.Module] = []
    for child in model.children():
        if isinstance(child, nn.Sequential):
            found += list(child)
    if found:
        return found
    return [c for c in model.children() if any(True for _ in c.parameters())]


def apply_checkpointing(model: nn.Module) -> int:
    """Recompute each block's activations in backward instead of keeping them. Returns the count."""
    blocks = blocks_of(model)
    for block in blocks:
        forward = block.forward

        @functools.wraps(forward)
        def checkpointed(*args: Any, _forward: Any = forward, **kwargs: Any) -> Any:
            return checkpoint(_forward, *args, use_reentrant=False, preserve_rng_state=False, **kwargs)

        block.forward = checkpointed
    return len(blocks)
