"""Recurrent cells stepped in a Python loop: an `nn.LSTMCell`, `nn.GRUCell` or `nn.RNNCell` called once per time
step, where `nn.LSTM`, `nn.GRU` or `nn.RNN` runs the whole sequence in one call (one fused op; cuDNN's on a GPU).

The hooks count the cells' calls on the detailed steps (`samples.StepCounts.cells`); the model tracker keeps the
first cell's shape (`cell_of`); `result.CellLoop` is what the run's measurements say of it.
"""

from __future__ import annotations

import torch
from torch import nn

from trainspeed.watch.result import CellLoop

CELL_TYPES = frozenset({nn.LSTMCell, nn.GRUCell, nn.RNNCell})
"""The cells the loop counts: exactly these classes (a subclass may change what a step does)."""

SEQUENCE_TYPES = frozenset({nn.LSTM, nn.GRU, nn.RNN})
"""The layers that run a whole sequence in one call: a time-first one (`batch_first=False`, their default) takes
its batch in the input's second dimension."""

RECURRENT_TYPES = CELL_TYPES | SEQUENCE_TYPES
"""Both: the module calls the hooks look at (one set lookup a call)."""


def time_first(module: nn.Module, x: object) -> bool:
    """Whether `x` is a batched sequence given to a time-first sequence layer: (time, batch, features)."""
    return (type(module) in SEQUENCE_TYPES and not module.batch_first and isinstance(x, torch.Tensor)
            and x.dim() == 3)


def cell_of(module: nn.Module) -> CellLoop:
    """The shape of a cell module (no calls counted yet)."""
    weight = getattr(module, "weight_ih", None)
    dtype = str(weight.dtype).removeprefix("torch.") if isinstance(weight, torch.Tensor) else "float32"
    return CellLoop(type(module).__name__, int(module.input_size), int(module.hidden_size),  # type: ignore[arg-type]
                    bool(module.bias), getattr(module, "nonlinearity", None), dtype=dtype)
