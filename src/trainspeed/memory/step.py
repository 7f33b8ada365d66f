"""One training step's set-up, shared by the estimate (fake tensors) and the measured run (real ones).

Below `estimate`, `measure`, `workspace` and `kernel_probe`: it imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainspeed.amp import amp_context

ModelArg = nn.Module | Callable[[], nn.Module]
InputArg = Callable[[int], Any] | Sequence[int]


def input_maker(example_input: InputArg) -> Callable[[int], tuple[Any, ...]]:
    """A callable batch -> tuple of model inputs, from a callable or a per-sample shape (float32)."""
    if callable(example_input):
        def make(batch: int) -> tuple[Any, ...]:
            value = example_input(batch)
            return tuple(value) if isinstance(value, (tuple, list)) else (value,)
        return make
    shape = tuple(int(d) for d in example_input)
    return lambda batch: (torch.randn(batch, *shape),)


def default_loss(output: Any) -> torch.Tensor:
    """The mean of the output (of its first element if it is a tuple or list)."""
    first = output[0] if isinstance(output, (tuple, list)) else output
    return first.float().mean()


@dataclass
class StepSetup:
    """What one training step needs; shared by the estimate and the measured run."""

    make_inputs: Callable[[int], tuple[Any, ...]]
    loss_fn: Callable[[Any], torch.Tensor]
    amp: str | None
    device_type: str


def training_step(model: nn.Module, optimizer: torch.optim.Optimizer, setup: StepSetup, batch: int,
                  device: torch.device, marks: Callable[[str], None] | None = None) -> dict[str, Any]:
    """One step: inputs, forward, loss, backward, optimizer step, gradients set to None.

    `marks(phase)` is called at each phase edge. Returns what it saw at the end of backward."""
    mark = marks or (lambda phase: None)
    mark("input")
    inputs = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in setup.make_inputs(batch))
    mark("forward")
    with amp_context(setup.device_type, setup.amp):
        output = model(*inputs)
        loss = setup.loss_fn(output)
    mark("backward")
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    mark("optimizer")
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    model.zero_grad(set_to_none=True)  # every gradient, where the optimizer holds only a rank's part (ZeRO)
    seen = {"grads": grads}
    del inputs, output, loss, grads
    mark("done")
    return seen


def state_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The optimizer's state tensors (moments, momentum buffers, step counters)."""
    tensors = []
    for state in optimizer.state.values():
        tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    return tensors
