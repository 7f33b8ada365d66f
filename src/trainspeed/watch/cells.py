"""Recurrent cells stepped in a Python loop: an `nn.LSTMCell`, `nn.GRUCell` or `nn.RNNCell` called once per time
step, where `nn.LSTM`, `nn.GRU` or `nn.RNN` runs the whole sequence in one call (one fused op; cuDNN's on a GPU).

The hooks count the cells' calls on the detailed steps (`samples.StepCounts.cells`); the model tracker keeps the
first cell's shape (`cell_of`); `result.CellLoop` is what the run's measurements say of it.
"""

from __future__ import annotations

from torch import nn

from trainspeed.watch.result import CellLoop

CELL_TYPES = frozenset({nn.LSTMCell, nn.GRUCell, nn.RNNCell})
"""The cells the loop counts: exactly these classes (a subclass may change what a step does)."""

def cell_of(module: nn.Module) -> CellLoop:
    """The shape of a cell module (no calls counted yet)."""
    return CellLoop(type(module).__name__, int(module.input_size), int(module.hidden_size),  # type: ignore[arg-type]
                    bool(module.bias), getattr(module, "nonlinearity", None))
