"""Evaluations seen during a watched run: from `model.eval()` to `model.train()`, and the
model called under `torch.no_grad()` or `torch.inference_mode()` outside the training step.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from trainspeed.watch.result import Evaluation

if TYPE_CHECKING:
    from trainspeed.watch.session import Watcher


@dataclasses.dataclass
class _Spans:
    """Evaluation spans of one kind ended during the measured steps: how many, their seconds, and the step counts at
    the first and the last of them."""

    count: int = 0
    seconds: float = 0.0
    first: int = -1
    last: int = -1

    def add(self, seconds: float, steps: int) -> None:
        self.count += 1
        self.seconds += seconds
        self.first = steps if self.first < 0 else self.first
        self.last = steps


def _has_parameters(module: torch.nn.Module) -> bool:
    return any(True for _ in module.parameters())


def mode_set(self: Watcher, module: torch.nn.Module, training: bool) -> None:
    """A module's mode was set (`model.eval()`, `model.train()`). From a module with parameters put in
    evaluation mode to the next `train()` is an evaluation, if no step ended between (a model trained in
    eval mode, to freeze its batch norm, trains on) and the steps are measured."""
    if not training:
        if self._eval_from is None and _has_parameters(module):
            self._eval_from = (self.clock.now(), self.steps_seen)
        return
    if self._eval_from is None:
        return
    (t0, steps), self._eval_from = self._eval_from, None
    if steps == self.steps_seen and self.clock.sums is not None:
        self.evals.add(self.clock.now() - t0, steps)


def grad_off_entered(self: Watcher) -> None:
    """torch.no_grad() or torch.inference_mode() entered on the watched thread (the outermost one). Outside every
    phase, during the measured steps and outside a model.eval() span, it may hold an evaluation: a global
    module pre-hook stands until the model is called (then it goes, and the rest of the span's module calls take
    torch's fast path again) or the span ends."""
    if self.clock.stack or self.clock.sums is None or self._eval_from is not None or self._model_id is None:
        return
    self._grad_off = (self.clock.now(), self.steps_seen)
    self._grad_off_called = False
    self._grad_off_hook = torch.nn.modules.module.register_module_forward_pre_hook(self._grad_off_call)


def _grad_off_call(self: Watcher, module: torch.nn.Module, args: Any) -> None:
    if id(module) == self._model_id and self._grad_off_hook is not None:
        self._grad_off_called = True
        self._grad_off_hook.remove()
        self._grad_off_hook = None


def grad_off_left(self: Watcher) -> None:
    """The outermost torch.no_grad() or torch.inference_mode() on the watched thread was left."""
    if self._grad_off is None:
        return
    if self._grad_off_hook is not None:
        self._grad_off_hook.remove()
        self._grad_off_hook = None
    (t0, steps), self._grad_off = self._grad_off, None
    if self._grad_off_called and steps == self.steps_seen and self.clock.sums is not None:
        self.quiet_evals.add(self.clock.now() - t0, steps)


def _evaluation(self: Watcher, summed: tuple[dict[str, float], float] | None, measured: int) -> Evaluation | None:
    """The model.eval() spans, and the no_grad spans that called the model where they came at most every other
    step (a generator run under no_grad for a GAN's critic, an agent choosing its actions, come every step: work
    of the step, not an evaluation)."""
    kinds = [("model.eval()", self.evals)] if self.evals.count else []
    if self.quiet_evals.count and self.quiet_evals.count <= max(1, measured // 2):
        kinds.append(("no_grad", self.quiet_evals))
    if not kinds or summed is None or summed[1] <= 0:
        return None
    count = sum(spans.count for _, spans in kinds)
    seconds = sum(spans.seconds for _, spans in kinds)
    first, last = min(spans.first for _, spans in kinds), max(spans.last for _, spans in kinds)
    return Evaluation(count=count, mean_ms=seconds * 1e3 / count, share=min(1.0, seconds / summed[1]),
                      every_steps=(last - first) / (count - 1) if count > 1 else None,
                      by=" and ".join(name for name, _ in kinds))
