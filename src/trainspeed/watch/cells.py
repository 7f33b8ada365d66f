"""Recurrent cells stepped in a Python loop: an `nn.LSTMCell`, `nn.GRUCell` or `nn.RNNCell` called once per time
step, where `nn.LSTM`, `nn.GRU` or `nn.RNN` runs the whole sequence in one call (one fused op; cuDNN's on a GPU).

The hooks count the cells' calls on the detailed steps (`step_counts.StepCounts.cells`); the model tracker keeps the first
cell's shape (`cell_of`); `CellLoop` is what the run's measurements say of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

CELL_TYPES = frozenset({nn.LSTMCell, nn.GRUCell, nn.RNNCell})
"""The cells the loop counts: exactly these classes (a subclass may change what a step does)."""

FUSED = {"LSTMCell": "LSTM", "GRUCell": "GRU", "RNNCell": "RNN"}
"""Each cell's layer over a whole sequence, in torch.nn."""


@dataclass(frozen=True)
class CellLoop:
    """A recurrent cell called in a Python loop, and how often."""

    kind: str
    """The cell's class: "LSTMCell", "GRUCell" or "RNNCell"."""
    input_size: int
    hidden_size: int
    bias: bool
    nonlinearity: str | None
    """RNNCell's ("tanh" or "relu"); None for the others."""
    calls_per_step: float = 0.0
    """Its calls per training step (with gradients on), the median over the detailed steps."""

    @property
    def fused(self) -> str:
        return FUSED[self.kind]

    def length(self, model_calls: float | None) -> int:
        """Time steps the loop runs per call of the model: its calls per step over the model's (`model_calls`,
        taken as one where none were counted)."""
        return max(1, round(self.calls_per_step / max(model_calls or 1.0, 1.0)))

    def layer(self) -> str:
        """The fused layer's constructor as a user would write it."""
        extra = "" if self.bias else ", bias=False"
        if self.nonlinearity not in (None, "tanh"):
            extra += f", nonlinearity={self.nonlinearity!r}"
        return f"nn.{self.fused}({self.input_size}, {self.hidden_size}, batch_first=True{extra})"


def cell_of(module: nn.Module) -> CellLoop:
    """The shape of a cell module (no calls counted yet)."""
    return CellLoop(type(module).__name__, int(module.input_size), int(module.hidden_size),  # type: ignore[arg-type]
                    bool(module.bias), getattr(module, "nonlinearity", None))
