"""What the probes after a watched run copy the shapes of (`trainspeed.measure`): not a measurement, the subject."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunSubject:
    """What the probes after a watched run copy the shapes of: the model (a weak reference: the script's), one
    sample of its input, the primary optimizer, and an item shaped like each loader's batch. Nothing of the
    user's data is kept."""

    model: Any = None
    """weakref.ref to the model (None: no model seen)."""
    input_spec: tuple[list[int], Any] | None = None
    """(one sample's shape, dtype) of the model's first input."""
    optimizer_kind: str | None = None
    optimizer_spec: Any = None
    """probe.optimizer.OptimizerSpec of the primary optimizer (None: none)."""
    loader_probes: list[tuple[Any, int]] = field(default_factory=list)
    """(an item shaped like the loader's batch, the rows of its TensorDataset when batchable, else 0), in the
    order of `WatchResult.loaders.each`."""
    batch_dim: int = 0
    """The dimension of the model's first input that holds the batch (1: a time-first sequence model's, fed
    (time, batch))."""
