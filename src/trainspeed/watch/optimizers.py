"""The optimizers of a watched run: the optimizers built inside the loop, and the primary one's class and shapes for
the doctor's probes (which optimizer delimits the steps is the step boundary's: `boundary.py`).
"""

from __future__ import annotations

import math
import statistics
from collections import deque

import torch

from trainspeed.probe.optimizer import OptimizerSpec, spec_of
from trainspeed.watch.result import OptimizerInfo, Optimizers

FAULTS_KEPT = 256
"""The optimizer steps whose page faults are kept (the latest): their median is the run's."""


class OptimizerTracker:
    """The primary optimizer as it was made (its class, settings and parameter shapes) and the optimizers built while
    watched."""

    def __init__(self) -> None:
        self.built = 0
        """Optimizers constructed after the first step of one (a new optimizer every step)."""
        self.build_s = 0.0
        self.kind: str | None = None
        """The primary optimizer's class name, lower case ("adamw"); None before one stepped."""
        self.spec: OptimizerSpec | None = None
        """The primary optimizer's class, settings and parameter shapes, for the doctor's probe."""
        self.faults: deque[int] = deque(maxlen=FAULTS_KEPT)
        """Minor page faults of each optimizer step the hooks timed, the latest FAULTS_KEPT."""

    def primary_is(self, optimizer: torch.optim.Optimizer) -> None:
        """`optimizer` delimits the steps from now on (`StepBoundary`)."""
        self.kind = type(optimizer).__name__.lower()
        self.spec = spec_of(optimizer)

    def optimizer_built(self, seconds: float) -> None:
        """An optimizer was constructed (its __init__ took `seconds`): counted once one has stepped."""
        if self.kind is not None:
            self.built += 1
            self.build_s += seconds

    def optimizer_faulted(self, faults: int) -> None:
        """An optimizer's step (its closure's calls aside) took `faults` minor page faults: fresh memory for its
        temporaries, where the allocator handed their blocks back to the system after the last step."""
        self.faults.append(faults)

    def part(self, changes: int) -> Optimizers:
        """The optimizers' part; `changes`: times another optimizer took over delimiting the steps."""
        spec = self.spec
        info = None if spec is None else OptimizerInfo(
            spec.cls.__name__, len(spec.shapes), sum(math.prod(s) for s in spec.shapes), spec.foreach, spec.fused)
        return Optimizers(info, changes, self.built, self.build_s * 1e3 / self.built if self.built else None,
                          statistics.median(self.faults) if self.faults else None)
