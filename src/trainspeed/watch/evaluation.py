"""Evaluations seen during a watched run: from `model.eval()` to `model.train()`, and the
model called under `torch.no_grad()` or `torch.inference_mode()` outside the training step.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import TYPE_CHECKING, Any

import torch

from trainspeed.watch.result import Evaluation

if TYPE_CHECKING:
    from trainspeed.watch.session import Watcher


@dataclasses.dataclass
class _Spans:
    """Evaluations of one kind (each one or more spans with no step between: `_Gap`): how many in the run and the
    step counts at the first and the last of them; how many ended during the measured steps, and their seconds."""

    count: int = 0
    seconds: float = 0.0
    first: int = -1
    last: int = -1
    in_run: int = 0

    def add(self, seconds: float, steps: int, measured: bool) -> None:
        self.in_run += 1
        self.first = steps if self.first < 0 else self.first
        self.last = steps
        if measured:
            self.count += 1
            self.seconds += seconds


@dataclasses.dataclass
class _Gap:
    """The evaluation under way: the spans (model.eval() ... train(), the model called under no_grad) that ended
    with no training step between them. Nested spans (`model.eval()` inside a function decorated with
    `@torch.no_grad()`) and back-to-back ones (one `no_grad` block per split) are one evaluation; its time is
    the union of their intervals."""

    steps: int
    measured: bool
    """It began during the measured steps (the warm-up's and the first step's evaluations are counted, not timed)."""
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
        (evals if "model.eval()" in self.kinds else quiet).add(self.seconds(), self.steps, self.measured)


def _span_ended(self: Watcher, kind: str, t0: float, t1: float, steps: int) -> None:
    """An evaluation span of `kind` ran from t0 to t1 with `steps` steps seen: part of the evaluation under way
    if no step ended since its last span, else the start of the next one (the one before is counted then)."""
    gap = self._eval_gap
    if gap is not None and gap.steps != steps:
        gap.into(self.evals, self.quiet_evals)
        gap = None
    if gap is None:
        gap = self._eval_gap = _Gap(steps, self.clock.sums is not None)
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
            self._eval_from = (self.clock.now(), self.steps_seen, weakref.ref(module))
            self._eval_called = False
            _unhook(self)
            self._eval_hook = torch.nn.modules.module.register_module_forward_pre_hook(self._eval_call)
        return
    if self._eval_from is None:
        return
    (t0, steps, _), self._eval_from = self._eval_from, None
    _unhook(self)
    if steps == self.steps_seen:
        _span_ended(self, "model.eval()", t0, self.clock.now(), steps)


def _eval_call(self: Watcher, module: torch.nn.Module, args: Any) -> None:
    """A module called during a model.eval() span (a global pre-hook, gone at the first call of the module put in
    evaluation mode or of the model): the span evaluates, and counts where no train() ends it (the run's last)."""
    opened = self._eval_from
    if opened is not None and (module is opened[2]() or id(module) == self._model_id):
        self._eval_called = True
        _unhook(self)


def _unhook(self: Watcher) -> None:
    if self._eval_hook is not None:
        self._eval_hook.remove()
        self._eval_hook = None


def closed(self: Watcher) -> None:
    """The watch stopped: the global pre-hooks of an open span go."""
    _unhook(self)
    if self._grad_off_hook is not None:
        self._grad_off_hook.remove()
        self._grad_off_hook = None


def training_again(self: Watcher, fetching: bool) -> None:
    """Asked (while a model.eval() span is open) as a DataLoader is asked for a batch and as a step ends: the module
    put in evaluation mode is training again with no `train()` call - Lightning's evaluation loop restores each
    module's `training` flag by hand. At a batch's fetch that is the evaluation's end (the next training batch);
    at a step's end its end is not known, and the span is dropped rather than timed with the step's work."""
    t0, steps, ref = self._eval_from  # type: ignore[misc]
    module = ref()
    if module is not None and not module.training:
        return
    self._eval_from = None
    _unhook(self)
    if fetching and module is not None and steps == self.steps_seen and not self.clock.stack:
        _span_ended(self, "model.eval()", t0, self.clock.now(), steps)


def grad_off_entered(self: Watcher) -> None:
    """torch.no_grad() or torch.inference_mode() entered on the watched thread (the outermost one). Outside every
    phase and outside a model.eval() span, it may hold an evaluation: a global
    module pre-hook stands until the model is called (then it goes, and the rest of the span's module calls take
    torch's fast path again) or the span ends."""
    if self.clock.stack or self._eval_from is not None or self._model_id is None:
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
    if self._grad_off_called and steps == self.steps_seen:
        _span_ended(self, "no_grad", t0, self.clock.now(), steps)


def _evaluation(self: Watcher, summed: tuple[dict[str, float], float] | None, measured: int) -> Evaluation | None:
    """The model.eval() spans, and the no_grad spans that called the model where they came at most every other
    step (a generator run under no_grad for a GAN's critic, an agent choosing its actions, come every step: work
    of the step, not an evaluation)."""
    evals, quiet = dataclasses.replace(self.evals), dataclasses.replace(self.quiet_evals)
    if self._eval_gap is not None:  # the evaluation under way (or the run's last), counted on copies
        self._eval_gap.into(evals, quiet)
    if self._eval_from is not None and self._eval_called:  # the run's last, with no train() after it: counted,
        steps = self._eval_from[1]  # not timed (where it ended is not known)
        if self._eval_gap is None or self._eval_gap.steps != steps:
            evals.add(0.0, steps, measured=False)
    kinds = [("model.eval()", evals)] if evals.count else []
    if quiet.count and quiet.count <= max(1, measured // 2):
        kinds.append(("no_grad", quiet))
    if not kinds or summed is None or summed[1] <= 0:
        return None
    count = sum(spans.count for _, spans in kinds)
    in_run = sum(spans.in_run for _, spans in kinds)
    seconds = sum(spans.seconds for _, spans in kinds)
    first, last = min(spans.first for _, spans in kinds), max(spans.last for _, spans in kinds)
    return Evaluation(count=count, mean_ms=seconds * 1e3 / count, share=min(1.0, seconds / summed[1]),
                      every_steps=(last - first) / (in_run - 1) if in_run > 1 else None,
                      by=" and ".join(name for name, _ in kinds), in_run=in_run)
