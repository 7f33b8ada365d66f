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
    """Evaluations of one kind ended during the measured steps (each one or more spans with no step between:
    `_Gap`): how many, their seconds, and the step counts at the first and the last of them."""

    count: int = 0
    seconds: float = 0.0
    first: int = -1
    last: int = -1

    def add(self, seconds: float, steps: int) -> None:
        self.count += 1
        self.seconds += seconds
        self.first = steps if self.first < 0 else self.first
        self.last = steps


@dataclasses.dataclass
class _Gap:
    """The evaluation under way: the spans (model.eval() ... train(), the model called under no_grad) that ended
    with no training step between them. Nested spans (`model.eval()` inside a function decorated with
    `@torch.no_grad()`) and back-to-back ones (one `no_grad` block per split) are one evaluation; its time is
    the union of their intervals."""

    steps: int
    intervals: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    kinds: set[str] = dataclasses.field(default_factory=set)

    def seconds(self) -> float:
        total, end = 0.0, float("-inf")
        for t0, t1 in sorted(self.intervals):
            if t1 > end:
                total += t1 - max(t0, end)
                end = t1
        return total

    def into(self, evals: _Spans, quiet: _Spans) -> None:
        """Count this evaluation: as a model.eval() one where any of its spans was, else as a no_grad one."""
        (evals if "model.eval()" in self.kinds else quiet).add(self.seconds(), self.steps)


def _span_ended(self: Watcher, kind: str, t0: float, t1: float, steps: int) -> None:
    """An evaluation span of `kind` ran from t0 to t1 with `steps` steps seen: part of the evaluation under way
    if no step ended since its last span, else the start of the next one (the one before is counted then)."""
    gap = self._eval_gap
    if gap is not None and gap.steps != steps:
        gap.into(self.evals, self.quiet_evals)
        gap = None
    if gap is None:
        gap = self._eval_gap = _Gap(steps)
    gap.intervals.append((t0, t1))
    gap.kinds.add(kind)


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
        _span_ended(self, "model.eval()", t0, self.clock.now(), steps)


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
        _span_ended(self, "no_grad", t0, self.clock.now(), steps)


def _evaluation(self: Watcher, summed: tuple[dict[str, float], float] | None, measured: int) -> Evaluation | None:
    """The model.eval() spans, and the no_grad spans that called the model where they came at most every other
    step (a generator run under no_grad for a GAN's critic, an agent choosing its actions, come every step: work
    of the step, not an evaluation)."""
    evals, quiet = dataclasses.replace(self.evals), dataclasses.replace(self.quiet_evals)
    if self._eval_gap is not None:  # the evaluation under way (or the run's last), counted on copies
        self._eval_gap.into(evals, quiet)
    kinds = [("model.eval()", evals)] if evals.count else []
    if quiet.count and quiet.count <= max(1, measured // 2):
        kinds.append(("no_grad", quiet))
    if not kinds or summed is None or summed[1] <= 0:
        return None
    count = sum(spans.count for _, spans in kinds)
    seconds = sum(spans.seconds for _, spans in kinds)
    first, last = min(spans.first for _, spans in kinds), max(spans.last for _, spans in kinds)
    return Evaluation(count=count, mean_ms=seconds * 1e3 / count, share=min(1.0, seconds / summed[1]),
                      every_steps=(last - first) / (count - 1) if count > 1 else None,
                      by=" and ".join(name for name, _ in kinds))
