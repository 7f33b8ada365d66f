"""The whole training step captured as one CUDA graph and replayed: one launch instead of dozens.

This follows PyTorch's recipe for whole-network capture: a few eager steps on a side stream
(they are real training steps), gradients set to None so the graph allocates them from its own
pool, then `torch.cuda.graph` around zero_grad + forward + backward + optimizer.step. Capturing
runs nothing; each `replay()` is one step on the same static input tensors. Optimizers that
keep their step count on the host need `capturable=True` (the caller switches it on).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

WARMUP_STEPS = 3


@dataclass
class GraphStep:
    graph: torch.cuda.CUDAGraph | None
    """None when the capture failed (see `error`); the warm-up steps ran all the same."""
    loss: torch.Tensor | None
    """The static loss tensor each replay overwrites."""
    warmup_losses: list[torch.Tensor]
    """Losses of the real steps run on the side stream before capture, in order."""
    error: str = ""


def capture_graph(step: Callable[[], torch.Tensor], zero_grad: Callable[[], None],
                  feeds: list[Callable[[], None]]) -> GraphStep:
    """`feeds[i]()` puts warm-up step i's batch into the static inputs (len(feeds) warm-up steps)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    losses = []
    with torch.cuda.stream(side):
        for feed in feeds:
            feed()
            losses.append(step())
    torch.cuda.current_stream().wait_stream(side)
    zero_grad()  # grads from the graph's private pool
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            loss = step()
    except RuntimeError as e:  # an op that cannot be captured: nothing of it ran
        torch.cuda.synchronize()
        return GraphStep(None, None, losses, str(e).splitlines()[0][:200] if str(e) else type(e).__name__)
    return GraphStep(graph, loss, losses)


def make_capturable(optimizer: torch.optim.Optimizer) -> list[dict]:
    """Switch on `capturable` where a param group has it; return the groups changed (to switch back)."""
    changed = []
    for group in optimizer.param_groups:
        if group.get("capturable") is False:
            group["capturable"] = True
            changed.append(group)
            for p in group["params"]:
                state = optimizer.state.get(p, {})
                step = state.get("step")
                if isinstance(step, torch.Tensor) and step.device != p.device:
                    state["step"] = step.to(p.device)
    return changed
