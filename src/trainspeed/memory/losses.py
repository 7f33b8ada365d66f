"""The loss a memory estimate trains on: named (`--loss cross-entropy|mse|mean`), the user's own (`FILE.py:fn`,
`module:fn`, called on the model's output), or chosen from the output's shape and the input, and said.

The loss decides what the step keeps for backward past the model's last layer: a mean of the output keeps nothing;
cross-entropy keeps its log-softmax, an output's worth of float32 (a language model's batch x context x vocabulary);
mean squared error keeps the difference from the target (the built-in `gpt`'s step: BENCHMARKS.md, "Memory estimate:
the loss"). The target a named loss compares
against is made inside the step, like the batch's labels: class indices (cross-entropy), values (mse)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 (torch's own alias)

from trainspeed.errors import UsageError

LOSS_NAMES = ("cross-entropy", "mse", "mean")


def _first(output: Any) -> torch.Tensor:
    first = output[0] if isinstance(output, (tuple, list)) else output
    if not isinstance(first, torch.Tensor):
        raise TypeError(f"the model's output is a {type(first).__name__}, not a tensor: give --loss FILE.py:fn")
    return first


def cross_entropy(output: Any) -> torch.Tensor:
    """Cross-entropy over the output's last dimension, against class indices drawn for every other position (a
    classifier's (N, C), a language model's (N, T, V))."""
    logits = _first(output)
    if logits.dim() < 2:
        raise TypeError(f"cross-entropy needs classes in the output's last dimension; it has shape {tuple(logits.shape)}")
    classes = logits.shape[-1]
    target = torch.randint(0, classes, logits.shape[:-1], device=logits.device)
    return F.cross_entropy(logits.reshape(-1, classes), target.reshape(-1))


def mse(output: Any) -> torch.Tensor:
    """Mean squared error against a target of the output's shape."""
    prediction = _first(output)
    return F.mse_loss(prediction.float(), torch.randn(prediction.shape, device=prediction.device))


def mean(output: Any) -> torch.Tensor:
    """The mean of the output (its first element if a tuple): a model whose forward returns its own loss."""
    return _first(output).float().mean()


NAMED: dict[str, Callable[[Any], torch.Tensor]] = {"cross-entropy": cross_entropy, "mse": mse, "mean": mean}


@dataclass
class ChosenLoss:
    """The loss picked at the first step from the output's shape and the input: a model that returns a scalar (its
    own loss) its mean; an output shaped like the input (an autoencoder) mse; classes in the last dimension of an
    output of two dimensions or more cross-entropy; else mse. `name` says which, once a step ran."""

    input_shape: Sequence[int]
    name: str | None = None

    def __call__(self, output: Any) -> torch.Tensor:
        first = _first(output)
        if self.name is None:
            self.name = self.choose(tuple(first.shape[1:]) if first.dim() else (), first.dim())
        return NAMED[self.name](output)

    def choose(self, per_sample: tuple[int, ...], dims: int) -> str:
        if dims == 0:
            return "mean"
        if per_sample == tuple(self.input_shape) or dims == 1 or per_sample[-1] < 2:
            return "mse"
        return "cross-entropy"


@dataclass(frozen=True)
class Loss:
    """The loss of an estimate, and how it was given."""

    fn: Callable[[Any], torch.Tensor]
    given: str | None
    """--loss as given (None: chosen, `ChosenLoss`)."""

    @property
    def said(self) -> str:
        """The report's line on it."""
        if self.given is not None:
            return f"loss: {self.given} (--loss)"
        name = self.fn.name if isinstance(self.fn, ChosenLoss) else None
        why = {"cross-entropy": "classes in the output's last dimension", "mse": "an output of values",
               "mean": "the model returns its own loss"}.get(name or "", "")
        return (f"loss: {name}, chosen from the output's shape ({why}); --loss cross-entropy|mse|mean|FILE.py:fn says "
                "which the training uses")


def resolve_loss(text: str | None, input_shape: Sequence[int]) -> Loss:
    """`--loss`: a name of LOSS_NAMES, FILE.py:fn or module:fn (called on the model's output, returning the scalar
    to backward), or None: chosen from the output at the first step."""
    if text is None:
        return Loss(ChosenLoss(input_shape), None)
    if text in NAMED:
        return Loss(NAMED[text], text)
    if ":" in text:
        from trainspeed.workloads.spec import resolve_callable

        return Loss(resolve_callable(text, "loss"), text)
    raise UsageError(f"--loss: give one of {', '.join(LOSS_NAMES)}, or FILE.py:fn / module:fn, got {text!r}")
