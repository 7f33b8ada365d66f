"""The optimizers of a watched run: which one delimits the steps, the optimizers built inside the loop, and the
primary one's class and shapes for the doctor's probes.

`OptimizerTracker` owns all of it; the watcher asks it at each optimizer step whether that step ends a step.
"""

from __future__ import annotations

import math
import weakref

import torch

from trainspeed.probe.optimizer import OptimizerSpec, spec_of
from trainspeed.watch.result import OptimizerInfo, Optimizers


class OptimizerTracker:
    """The primary optimizer (whose steps delimit the watched steps) and the optimizers built while watched."""

    def __init__(self) -> None:
        self.primary: int | None = None
        """id() of the primary optimizer (None: none has stepped; steps are delimited by backward calls)."""
        self._primary_ref: weakref.ref[torch.optim.Optimizer] | None = None
        self._rival: tuple[int, int] | None = None
        """(id, steps seen) at the last step of an optimizer other than the primary one."""
        self.changes = 0
        """Times another optimizer took over delimiting the steps (the primary one gone, or stopped)."""
        self.built = 0
        """Optimizers constructed after the first step of one (a new optimizer every step)."""
        self.build_s = 0.0
        self.kind: str | None = None
        """The primary optimizer's class name, lower case ("adamw")."""
        self.spec: OptimizerSpec | None = None
        """The primary optimizer's class, settings and parameter shapes, for the doctor's probe."""

    def delimits(self, optimizer: torch.optim.Optimizer, steps_seen: int) -> bool:
        """Whether `optimizer` is the one whose steps delimit the watched steps: the first one seen, until it is
        gone (a script that builds a new optimizer every step or every stage drops the old one) or another one
        steps twice with no step of it in between (a second stage's optimizer, the old one kept; a critic stepped
        five times per generator step); that one delimits them from then on. Asked at the first step of the
        first optimizer and at every step of the others."""
        if self.primary is None:
            self._make_primary(optimizer)
        elif id(optimizer) != self.primary:
            gone = self._primary_ref is not None and self._primary_ref() is None
            mark = (id(optimizer), steps_seen)
            if gone or self._rival == mark:
                self._make_primary(optimizer)
                self.changes += 1
            else:
                self._rival = mark
        return id(optimizer) == self.primary

    def _make_primary(self, optimizer: torch.optim.Optimizer) -> None:
        self.primary = id(optimizer)
        try:
            self._primary_ref = weakref.ref(optimizer)
        except TypeError:  # a class with __slots__ and no __weakref__: known gone only by the other rule
            self._primary_ref = None
        self._rival = None
        self.kind = type(optimizer).__name__.lower()
        self.spec = spec_of(optimizer)

    def optimizer_built(self, seconds: float) -> None:
        """An optimizer was constructed (its __init__ took `seconds`): counted once one has stepped."""
        if self.primary is not None:
            self.built += 1
            self.build_s += seconds

    def part(self) -> Optimizers:
        spec = self.spec
        info = None if spec is None else OptimizerInfo(
            spec.cls.__name__, len(spec.shapes), sum(math.prod(s) for s in spec.shapes), spec.foreach, spec.fused)
        return Optimizers(info, self.changes, self.built, self.build_s * 1e3 / self.built if self.built else None)
