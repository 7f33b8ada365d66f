"""The optimizers of a watched run: which one delimits the steps, the optimizers built inside the
loop, and the primary one's class and shapes for the doctor's probes.
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING

import torch

from trainspeed.probe.optimizer import spec_of
from trainspeed.watch.result import OptimizerInfo

if TYPE_CHECKING:
    from trainspeed.watch.session import Watcher


def _is_primary(self: Watcher, optimizer: torch.optim.Optimizer) -> bool:
    """Whether `optimizer` is the one whose steps delimit the watched steps: the first one seen, until
    it is gone (a script that builds a new optimizer every step or every stage drops the old one) or
    another one steps twice with no step of it in between (a second stage's optimizer, the old one
    kept; a critic stepped five times per generator step); that one delimits them from then on.
    Runs at the first step of the first optimizer and at every step of the others: each class
    seen stepping has its whole step timed from then on (Hooks.watch_optimizer)."""
    if type(optimizer) not in self.hooks.optimizer_classes:
        self.hooks.watch_optimizer(type(optimizer))
    if self.primary_optimizer is None:
        self._make_primary(optimizer)
        backwards = self.steps_seen + self.backward_boundary  # the last one's step had not ended
        self.backward_boundary = False  # steps were delimited by backward calls until now
        if self.steps_seen:
            self._rebase(backwards)
    elif id(optimizer) != self.primary_optimizer:
        gone = self._primary_ref is not None and self._primary_ref() is None
        mark = (id(optimizer), self.steps_seen)
        if gone or self._rival == mark:
            self._make_primary(optimizer)
            self.primary_changes += 1
        else:
            self._rival = mark
    return id(optimizer) == self.primary_optimizer


def _make_primary(self: Watcher, optimizer: torch.optim.Optimizer) -> None:
    self.primary_optimizer = id(optimizer)
    try:
        self._primary_ref = weakref.ref(optimizer)
    except TypeError:  # a class with __slots__ and no __weakref__: known gone only by the other rule
        self._primary_ref = None
    self._rival = None
    self.optimizer_kind = type(optimizer).__name__.lower()
    self.optimizer_spec = spec_of(optimizer)


def optimizer_built(self: Watcher, seconds: float) -> None:
    """An optimizer was constructed (its __init__ took `seconds`): counted once one has stepped."""
    if self.primary_optimizer is not None:
        self.optimizers_built += 1
        self.optimizer_build_s += seconds


def _rebase(self: Watcher, backwards: int) -> None:
    """The first optimizer step came after steps delimited by backward calls: those were the
    micro-batches of a step (gradients accumulated over several backward calls before the first
    `optimizer.step()`), or a stretch of the script before its training loop, not training steps.
    The step ending now becomes step 0 and everything is measured again from it: warm-up, the
    profiler window, the samples and the sums, the sampler's 'other' lines and --steps' count."""
    self.notes.append(f"the first optimizer step came after {backwards} backward calls (micro-batches "
                      "accumulated before it): measured from that step on, as training steps")
    if self.window.prof is not None:
        with self._profiler_edge():
            self.window.close()
    self._measure_from_scratch(self.window.steps)
    self.pending.clear()
    self.clock.forget_sums()
    if self.settled_at == 0:
        self._start_sums()
    if self.sampler is not None:
        self.sampler.forget_other()


def _optimizer_info(self: Watcher) -> OptimizerInfo | None:
    spec = self.optimizer_spec
    if spec is None:
        return None
    return OptimizerInfo(spec.cls.__name__, len(spec.shapes), sum(math.prod(s) for s in spec.shapes),
                         spec.foreach, spec.fused)
