"""The seed's training loop in its four variants, written as plainly as the seed wrote it, and `fit`.

The four seed variants compute the same thing from the same initial weights; they differ only in how often
the host reads the loss (each read a device synchronisation on a GPU). Each loop runs a range
of epochs at a time, so the runner can interleave the variants chunk by chunk (ABCDABCD...)
and let drift on a shared machine hit all of them alike.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import torch
from torch import nn, optim

VARIANTS = ("seed", "record_every_200", "no_record", "sync_free", "fit")
LEARNING_RATE = 0.01  # the seed's SGD learning rate


@dataclass(frozen=True)
class LoopOutput:
    """What a training loop hands back."""

    losses: list[float]
    """Recorded losses, in order."""
    recorded_epochs: list[int]
    """The 1-based epoch of each recorded loss."""
    log_lines: list[str]
    """What the loop printed."""


class _Loop:
    def __init__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int) -> None:
        self.model, self.x, self.y, self.epochs = model, x, y, epochs
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = optim.SGD(model.parameters(), lr=LEARNING_RATE)
        self.loss = torch.zeros((), device=x.device)
        """The latest epoch's loss, still on the device."""

    def step(self) -> torch.Tensor:
        outputs = self.model(self.x)  # (N, 3)
        loss = self.criterion(outputs, self.y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss


class RecordingLoop(_Loop):
    """The seed's loop: `losses.append(loss.item())` every `record_every` epochs, a print every `print_every`."""

    def __init__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, *,
                 record_every: int, print_every: int) -> None:
        super().__init__(model, x, y, epochs)
        self.record_every, self.print_every = record_every, print_every
        self.losses: list[float] = []
        self.recorded: list[int] = []
        # Printed lines go to memory, not the terminal, so the progress bar stays readable.
        self.log = io.StringIO()

    def run(self, start: int, stop: int) -> None:
        for epoch in range(start, stop):
            loss = self.step()
            if self.record_every and (epoch + 1) % self.record_every == 0:
                self.losses.append(loss.item())
                self.recorded.append(epoch + 1)
            if self.print_every and (epoch + 1) % self.print_every == 0:
                print(f"Epoch [{epoch + 1}/{self.epochs}], Loss: {loss.item():.4f}", file=self.log)
            self.loss = loss

    def finish(self) -> LoopOutput:
        return LoopOutput(self.losses, self.recorded, self.log.getvalue().splitlines())


class SyncFreeLoop(_Loop):
    """Every epoch's loss written into a preallocated device buffer; one transfer at the end."""

    def __init__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int) -> None:
        super().__init__(model, x, y, epochs)
        self.buffer = torch.empty(epochs, device=x.device)  # (epochs,)

    def run(self, start: int, stop: int) -> None:
        for epoch in range(start, stop):
            loss = self.step()
            self.buffer[epoch] = loss.detach()  # a device-side copy: no host read
            self.loss = loss

    def finish(self) -> LoopOutput:
        losses = self.buffer.tolist()  # the one host read
        return LoopOutput(losses, list(range(1, self.epochs + 1)), [])


class FitLoop:
    """`trainspeed.fit` on the same job: it measures its options and takes the fastest."""

    def __init__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int) -> None:
        from trainspeed.loop import FastLoop  # the demo needs the loop only for this variant

        self.optimizer = optim.SGD(model.parameters(), lr=LEARNING_RATE)
        self.fast = FastLoop(model, (x, y), nn.CrossEntropyLoss(), self.optimizer, epochs, device=x.device)
        self.loss = torch.zeros((), device=x.device)
        self.strategy = ""
        self.explain: list[str] = []

    def run(self, start: int, stop: int) -> None:
        self.fast.run(stop - start)  # one optimizer step per epoch: the seed trains on one full batch

    def finish(self) -> LoopOutput:
        result = self.fast.finish()
        self.loss = torch.tensor(result.losses[-1]) if result.losses else self.loss
        self.strategy = result.strategy.name
        self.explain = result.strategy.explain
        return LoopOutput(result.losses, result.recorded_steps, [])


def make_loop(variant: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor,
              epochs: int) -> RecordingLoop | SyncFreeLoop | FitLoop:
    """The loop of one named variant."""
    if variant == "seed":
        return RecordingLoop(model, x, y, epochs, record_every=1, print_every=100)
    if variant == "record_every_200":
        return RecordingLoop(model, x, y, epochs, record_every=200, print_every=100)
    if variant == "no_record":
        return RecordingLoop(model, x, y, epochs, record_every=0, print_every=0)
    if variant == "sync_free":
        return SyncFreeLoop(model, x, y, epochs)
    if variant == "fit":
        return FitLoop(model, x, y, epochs)
    raise ValueError(f"unknown demo variant {variant!r} (choose from {', '.join(VARIANTS)})")
