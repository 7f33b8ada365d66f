"""The losses a script's run produced: each tensor of one element that backward started from, kept as a copy on
its device (no read, so no wait on the device) and read once at the end. Only for `doctor --try`'s runs, which
compare a lever's run with a plain one."""

from __future__ import annotations

import functools
from typing import Any

import torch

KEPT = 100_000
"""At most this many losses are kept (the first ones)."""


class LossRecorder:
    """Wraps torch.autograd.backward (Tensor.backward calls it) while installed."""

    def __init__(self) -> None:
        self._kept: list[torch.Tensor] = []
        self._original: Any = None

    def install(self) -> None:
        original = self._original = torch.autograd.backward
        kept = self._kept

        @functools.wraps(original)
        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            first = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
            if isinstance(first, torch.Tensor) and first.numel() == 1 and len(kept) < KEPT:
                kept.append(first.detach().reshape(()).clone())
            return original(tensors, *args, **kwargs)

        torch.autograd.backward = backward

    def uninstall(self) -> None:
        if self._original is not None:
            torch.autograd.backward = self._original
            self._original = None

    def values(self) -> list[float]:
        """The losses in order, as float64 (exact for float32, bfloat16 and float16)."""
        if not self._kept:
            return []
        return [float(v) for v in torch.stack([t.cpu().double() for t in self._kept]).tolist()]  # MPS has no float64
