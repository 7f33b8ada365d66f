"""Per-layer rows for the estimate: output shape, parameters, bytes saved for backward."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from trainspeed.memory.result import LayerMemory
from trainspeed.memory.tracker import storage_key


@dataclass
class _Call:
    name: str
    kind: str
    leaf: bool
    params: int
    saved: int = 0
    shape: list[int] | None = None

    def returned(self, shape: list[int] | None) -> None:
        """The call returned, its first tensor of this shape."""
        self.shape = shape

    def kept(self, nbytes: int) -> None:
        """It saved a storage of `nbytes` for backward."""
        self.saved += nbytes


class LayerRecorder:
    """Module hooks plus a saved-tensors hook: which call saved what for backward."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.calls: list[_Call] = []
        self.stack: list[_Call] = []
        self.seen_storages: set[int] = set()
        self.param_storages = {storage_key(p) for p in model.parameters()}
        self.counted_params: set[int] = set()
        self.loss_call = _Call("(loss and code outside modules)", "", True, 0)

    def _pre(self, name: str, module: nn.Module) -> None:
        own = [p for p in module.parameters(recurse=False) if id(p) not in self.counted_params]
        self.counted_params.update(id(p) for p in own)
        leaf = next(module.children(), None) is None
        call = _Call(name or "(model)", type(module).__name__, leaf, sum(p.numel() for p in own))
        self.calls.append(call)
        self.stack.append(call)

    def _post(self, output: Any) -> None:
        call = self.stack.pop()
        first = next((t for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor)), None)
        call.returned(list(first.shape) if first is not None else None)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        key = storage_key(t)
        if key not in self.param_storages and key not in self.seen_storages:
            self.seen_storages.add(key)
            owner = self.stack[-1] if self.stack else self.loss_call
            owner.kept(t.untyped_storage().nbytes())
        return t

    @contextmanager
    def recording(self) -> Iterator[LayerRecorder]:
        handles = []
        for name, module in self.model.named_modules():
            handles.append(module.register_forward_pre_hook(lambda m, a, _n=name: self._pre(_n, m)))
            handles.append(module.register_forward_hook(lambda m, a, out: self._post(out)))
        try:
            with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
                yield self
        finally:
            for h in handles:
                h.remove()

    def rows(self) -> list[LayerMemory]:
        """Leaf calls, plus any non-leaf call whose own code saved tensors, in call order."""
        calls = [c for c in self.calls if c.leaf or c.saved]
        if self.loss_call.saved:
            calls.append(self.loss_call)
        counts: dict[str, int] = {}
        out = []
        for c in calls:
            counts[c.name] = counts.get(c.name, 0) + 1
            name = c.name if counts[c.name] == 1 else f"{c.name} (call {counts[c.name]})"
            if not c.leaf and c.name != self.loss_call.name:
                name += " (own ops)"
            out.append(LayerMemory(name=name, kind=c.kind, output_shape=c.shape, params=c.params, saved_bytes=c.saved))
        return out
