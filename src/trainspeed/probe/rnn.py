"""A recurrent cell stepped over a sequence in Python against the fused layer over the same sequence.

An `nn.LSTMCell` called once per time step pays every op of the cell, forward and backward, per step of the
sequence; `nn.LSTM` runs the sequence as one op (its own fused kernel, cuDNN's on a GPU). The probe times both,
forward and backward, on fresh modules of the run's sizes and fresh inputs of its batch and length: nothing of
the user's (weights, data, gradients) is touched.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch
from torch import nn

from trainspeed.watch.cells import CellLoop

PROBE_ELEMENTS = 50_000_000
"""Sequences of more elements than this (batch x length x width) are not probed."""


def _module(loop: CellLoop, kind: str, device: str, **extra: Any) -> nn.Module:
    """A fresh `torch.nn.<kind>` of the loop's sizes, bias and nonlinearity (the cell, or its fused layer)."""
    if loop.nonlinearity:
        extra["nonlinearity"] = loop.nonlinearity
    return getattr(nn, kind)(loop.input_size, loop.hidden_size, bias=loop.bias, **extra).to(device)


def _median_ms(run: object, repeats: int, device: str) -> float:
    times = []
    for i in range(repeats + 1):  # the first call builds caches (cuDNN's plan, the allocator's blocks): untimed
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        run()  # type: ignore[operator]
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if i:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def cell_loop_ms(loop: CellLoop, batch: int, length: int, device: str = "cpu",
                 repeats: int = 5) -> tuple[float, float] | None:
    """(the cell stepped over `length` steps, the fused layer over the same sequence) in milliseconds, forward and
    backward, on a batch of `batch`; None where the sequence is too large to probe or a length under 2."""
    if length < 2 or batch < 1 or batch * length * max(loop.input_size, loop.hidden_size) > PROBE_ELEMENTS:
        return None
    cell, fused = _module(loop, loop.kind, device), _module(loop, loop.fused, device, batch_first=True)
    x = torch.randn(batch, length, loop.input_size, device=device)
    lstm = loop.kind == "LSTMCell"

    def stepped() -> None:
        h = torch.zeros(batch, loop.hidden_size, device=device)
        state = (h, torch.zeros_like(h)) if lstm else h
        outs = []
        for t in range(length):
            state = cell(x[:, t], state)
            outs.append(state[0] if lstm else state)
        torch.stack(outs, 1).sum().backward()

    def whole() -> None:
        out, _ = fused(x)
        out.sum().backward()

    return _median_ms(stepped, repeats, device), _median_ms(whole, repeats, device)
