"""Loops and fakes shared by the watcher's tests."""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn

from trainspeed.watch import Watcher
from trainspeed.workloads import load_iris_split, make_iris_mlp


def seed_loop(epochs: int) -> list[float]:
    d = load_iris_split()
    model = make_iris_mlp(seed=0)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for _ in range(epochs):
        loss = criterion(model(d.x_train), d.y_train)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def tiny_step() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    """The Iris MLP, its SGD optimizer and a batch of 8 random inputs."""
    model = make_iris_mlp(seed=0)
    return model, torch.optim.SGD(model.parameters(), lr=0.01), torch.randn(8, 4)


def fake_cuda_events(monkeypatch) -> list[Any]:
    """torch.cuda.Event replaced by a fake with its interface, on a CPU-only machine; returns the list
    of the events made."""
    made: list[Any] = []

    class FakeEvent:
        def __init__(self, enable_timing: bool = False) -> None:
            made.append(self)

        def record(self) -> None: ...
        def query(self) -> bool: return True
        def synchronize(self) -> None: ...
        def elapsed_time(self, end: FakeEvent) -> float: return 0.5

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    return made


def stamped_cuda_events(monkeypatch) -> list[float]:
    """torch.cuda.Event replaced by a fake stamped with a fake device clock, and torch.cuda.synchronize by a no-op;
    returns that clock (one float, in ms), which the test advances as the device would work."""
    device_now = [0.0]

    class StampedEvent:
        def __init__(self, enable_timing: bool = False) -> None:
            self.at = 0.0

        def record(self) -> None:
            self.at = device_now[0]

        def query(self) -> bool:
            return True

        def synchronize(self) -> None: ...

        def elapsed_time(self, end: StampedEvent) -> float:
            return end.at - self.at

    monkeypatch.setattr(torch.cuda, "Event", StampedEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    return device_now


OPTIMIZER = object()


def as_if_on_cuda(w: Watcher) -> None:
    """The watcher's steps as on a CUDA run (its detailed steps' phase edges record CUDA events), on a CPU-only machine:
    what the watcher does when the model's first input turns out to be on a GPU, less NVML and the reads' rule."""
    w.schedule.on_cuda()
    w.edges.events_on(w.schedule.detailed)


def fake_clock_run(w: Watcher, clock: list[float], steps: int, checkpoint_every: int = 0) -> int:
    """`steps` steps of exactly 1 s on the fake clock `clock`: 0.75 s forward, then a 0.1 s host read
    and 0.15 s of other work, ended by one optimizer's step; returns how many of them ran quiet.
    With `checkpoint_every` N, every step whose index is N-1 modulo N also saves for 5 s."""
    frame, quiet = sys._getframe(), 0
    for _ in range(steps):
        quiet += w.schedule.seen < w.schedule.quiet_until
        w.edges.enter("forward")
        clock[0] += 0.75
        w.edges.exit("forward")
        w.reads.host_read("item", clock[0], clock[0] + 0.1, frame)
        clock[0] += 0.25
        if checkpoint_every and w.schedule.seen % checkpoint_every == checkpoint_every - 1:
            w.edges.enter("checkpoint")
            clock[0] += 5.0
            w.edges.exit("checkpoint")
        w.step_ended(OPTIMIZER)  # type: ignore[arg-type]
    return quiet


class TimedSGD(torch.optim.SGD):
    """An SGD of its own class: watching it patches this class's step, not every SGD's."""


def hf_tiny_train(folder: str, *, steps: int, accumulation: int = 1, callbacks: list[Any] | None = None,
                  watcher: Watcher | None = None) -> tuple[nn.Module, list[float]]:
    """A 1-layer GPT-2 (from its config) trained by Hugging Face's Trainer on random ids, batches of 8, logging
    every step: the model and its logged losses. Needs transformers and accelerate."""
    import transformers as hf

    class Ids(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __init__(self) -> None:
            self.ids = torch.randint(0, 100, (64, 16), generator=torch.Generator().manual_seed(0))

        def __len__(self) -> int:
            return len(self.ids)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    hf.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = hf.GPT2LMHeadModel(hf.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=16))
    args = hf.TrainingArguments(output_dir=folder, max_steps=steps, per_device_train_batch_size=8, logging_steps=1,
                                gradient_accumulation_steps=accumulation, save_strategy="no", report_to=[],
                                disable_tqdm=True, use_cpu=True, seed=0)
    trainer = hf.Trainer(model=model, args=args, train_dataset=Ids(), callbacks=callbacks or [])
    if watcher is None:
        trainer.train()
    else:
        with watcher:
            trainer.train()
    return model, [log["loss"] for log in trainer.state.log_history if "loss" in log]
