"""Evaluations seen during a watched run: from `model.eval()` to `model.train()`, and the
model called under `torch.no_grad()` or `torch.inference_mode()` outside the training step.

`EvaluationTracker` owns every count and span of them: the number of evaluations is counted here, and nowhere
else (`_Spans.add`, from `_Gap.into`).
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable
from typing import Any

import torch

from trainspeed.watch.model import has_parameters
from trainspeed.watch.phases import PhaseClock
from trainspeed.watch.result import Evaluation


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


class EvaluationTracker:
    """The run's evaluations. Reads the phase clock (the time, the open phases, whether the measured steps have
    started), the steps seen so far and the model's id; told of mode changes, no_grad spans and batches asked."""

    def __init__(self, clock: PhaseClock, steps_seen: Callable[[], int], model_id: Callable[[], int]) -> None:
        self._clock, self._steps_seen, self._model_id = clock, steps_seen, model_id
        self._grad_off: tuple[float, int] | None = None
        self._grad_off_called = False
        self._grad_off_hook: Any = None
        self._eval_hook: Any = None
        self.restart()

    def restart(self) -> None:
        """Counting starts (again: the watcher measures from scratch after backward-delimited steps)."""
        self._unhook()
        self.evals = _Spans()
        """Evaluations with a model.eval() span (to model.train(), or until the model trains again), counted over
        the run and timed over the measured steps (`mode_set`)."""
        self.opened: tuple[float, int, weakref.ref[torch.nn.Module]] | None = None
        """(time, steps seen, the module) at the model.eval() that opened the evaluation under way."""
        self.quiet_evals = _Spans()
        """Evaluations without model.eval(): spans of torch.no_grad() or torch.inference_mode() entered outside every
        phase in which the model was called, with no step ended inside (`grad_off_entered`)."""
        self._gap: _Gap | None = None
        """The evaluation under way: its spans so far, with no step since (`_span_ended`)."""
        self._eval_called = False
        """The model (or the module put in evaluation mode) was called during the open model.eval() span."""

    @property
    def evaluating(self) -> bool:
        """An evaluation is under way now: a model.eval() span is open, opened since the last step ended (a model
        trained in eval mode, its batch norm frozen, trains on after its first step). Read by the stack sampler's
        thread and the DataLoader hooks: the samples and the validation batches then are the evaluation's, not the
        training step's. A no_grad span alone is not taken for one while it runs: a GAN's generator or an agent's
        choice of action runs under no_grad on every step, as part of it."""
        opened = self.opened
        return opened is not None and opened[1] == self._steps_seen()

    def _span_ended(self, kind: str, t0: float, t1: float, steps: int) -> None:
        """An evaluation span of `kind` ran from t0 to t1 with `steps` steps seen: part of the evaluation under way
        if no step ended since its last span, else the start of the next one (the one before is counted then)."""
        gap = self._gap
        if gap is not None and gap.steps != steps:
            gap.into(self.evals, self.quiet_evals)
            gap = None
        if gap is None:
            gap = self._gap = _Gap(steps, self._clock.summing)
        gap.intervals.append((t0, t1))
        gap.kinds.add(kind)

    def mode_set(self, module: torch.nn.Module, training: bool) -> None:
        """A module's mode was set (`model.eval()`, `model.train()`). From a module with parameters put in
        evaluation mode to the next `train()` is an evaluation, if no step ended between (a model trained in
        eval mode, to freeze its batch norm, trains on) and the steps are measured."""
        clock = self._clock
        if not training:
            if self.opened is None and has_parameters(module):
                self.opened = (clock.now(), self._steps_seen(), weakref.ref(module))
                self._eval_called = False
                self._unhook()
                self._eval_hook = torch.nn.modules.module.register_module_forward_pre_hook(self._eval_call)
            return
        if self.opened is None:
            return
        (t0, steps, _), self.opened = self.opened, None
        self._unhook()
        if steps == self._steps_seen():
            self._span_ended("model.eval()", t0, clock.now(), steps)

    def _eval_call(self, module: torch.nn.Module, args: Any) -> None:
        """A module called during a model.eval() span (a global pre-hook, gone at the first call of the module put
        in evaluation mode or of the model): the span evaluates, and counts where no train() ends it (the run's
        last)."""
        opened = self.opened
        if opened is not None and (module is opened[2]() or id(module) == self._model_id()):
            self._eval_called = True
            self._unhook()

    def _unhook(self) -> None:
        if self._eval_hook is not None:
            self._eval_hook.remove()
            self._eval_hook = None

    def closed(self) -> None:
        """The watch stopped: the global pre-hooks of an open span go."""
        self._unhook()
        if self._grad_off_hook is not None:
            self._grad_off_hook.remove()
            self._grad_off_hook = None

    def training_again(self, fetching: bool) -> None:
        """Asked (while a model.eval() span is open) as a DataLoader is asked for a batch and as a step ends: the
        module put in evaluation mode is training again with no `train()` call - Lightning's evaluation loop
        restores each module's `training` flag by hand. At a batch's fetch that is the evaluation's end (the next
        training batch); at a step's end its end is not known, and the span is dropped rather than timed with the
        step's work."""
        t0, steps, ref = self.opened  # type: ignore[misc]
        module = ref()
        if module is not None and not module.training:
            return
        self.opened = None
        self._unhook()
        clock = self._clock
        if fetching and module is not None and steps == self._steps_seen() and not clock.stack:
            self._span_ended("model.eval()", t0, clock.now(), steps)

    def grad_off_entered(self) -> None:
        """torch.no_grad() or torch.inference_mode() entered on the watched thread (the outermost one). Outside
        every phase and outside a model.eval() span, it may hold an evaluation: a global module pre-hook stands
        until the model is called (then it goes, and the rest of the span's module calls take torch's fast path
        again) or the span ends."""
        clock = self._clock
        if clock.stack or self.opened is not None:
            return
        self._grad_off = (clock.now(), self._steps_seen())
        self._grad_off_called = False
        self._grad_off_hook = torch.nn.modules.module.register_module_forward_pre_hook(self._grad_off_call)

    def _grad_off_call(self, module: torch.nn.Module, args: Any) -> None:
        if id(module) == self._model_id() and self._grad_off_hook is not None:
            self._grad_off_called = True
            self._grad_off_hook.remove()
            self._grad_off_hook = None

    def grad_off_left(self) -> None:
        """The outermost torch.no_grad() or torch.inference_mode() on the watched thread was left."""
        if self._grad_off is None:
            return
        if self._grad_off_hook is not None:
            self._grad_off_hook.remove()
            self._grad_off_hook = None
        (t0, steps), self._grad_off = self._grad_off, None
        if self._grad_off_called and steps == self._steps_seen():
            self._span_ended("no_grad", t0, self._clock.now(), steps)

    def part(self, summed: tuple[dict[str, float], float] | None, measured: int) -> Evaluation | None:
        """The model.eval() spans, and the no_grad spans that called the model where they came at most every other
        step (a generator run under no_grad for a GAN's critic, an agent choosing its actions, come every step:
        work of the step, not an evaluation)."""
        evals, quiet = dataclasses.replace(self.evals), dataclasses.replace(self.quiet_evals)
        after: tuple[str, float] | None = None
        """(kind, seconds) of an evaluation after the last step (the run's last): in no measured step's time."""
        gap = self._gap
        if gap is not None:  # the evaluation under way (or the run's last), counted on copies
            gap.into(evals, quiet)
            if gap.measured and gap.steps == self._steps_seen():
                after = ("model.eval()" if "model.eval()" in gap.kinds else "no_grad", gap.seconds())
        if self.opened is not None and self._eval_called:  # the run's last, with no train() after it: counted,
            steps = self.opened[1]  # not timed (where it ended is not known)
            if self._gap is None or self._gap.steps != steps:
                evals.add(0.0, steps, measured=False)
        kinds = [("model.eval()", evals)] if evals.count else []
        if quiet.count and quiet.count <= max(1, measured // 2):
            kinds.append(("no_grad", quiet))
        if not kinds or summed is None or summed[1] <= 0:
            return None
        count = sum(spans.count for _, spans in kinds)
        in_run = sum(spans.in_run for _, spans in kinds)
        seconds = sum(spans.seconds for _, spans in kinds)
        outside = after[1] if after is not None and after[0] in (name for name, _ in kinds) else 0.0
        first, last = min(spans.first for _, spans in kinds), max(spans.last for _, spans in kinds)
        # of the measured run: its steps and the evaluation after the last one (a Lightning run validating every 4
        # steps spent 95% of fit() there; against the steps' time alone that read as more than all of it)
        return Evaluation(count=count, mean_ms=seconds * 1e3 / count, share=seconds / (summed[1] + outside),
                          step_ms=(seconds - outside) * 1e3 / measured if measured else 0.0,
                          every_steps=(last - first) / (in_run - 1) if in_run > 1 else None,
                          by=" and ".join(name for name, _ in kinds), in_run=in_run)
