"""`fit`'s steps as they run: eager steps, replays of a captured step, and calls of the compiled
function, over the job's batches, with the losses recorded without host reads.

`Job` is what a step needs of the job (set up once by `FastLoop`); `Runner` owns what the steps taken so far
left: their count by runner, their times, the recorded losses, the batches' iterator, and the forms of the step
that capturing made (a replayable step, a CUDA graph, a compiled function of K steps).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainspeed.amp import optimizer_step
from trainspeed.loop import plan
from trainspeed.loop.capture import CapturedStep
from trainspeed.loop.checks import check_loss
from trainspeed.loop.compiled import STEPS_PER_CALL, save_times
from trainspeed.loop.cuda_graph import GraphStep
from trainspeed.loop.data import Group, TrainData
from trainspeed.loop.ddp import DataParallel
from trainspeed.loop.recorder import LossRecorder

COMPILED_TIMED_CALLS = 3


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def data_device(data: object) -> torch.device | None:
    tensors = data if isinstance(data, (tuple, list)) else getattr(data, "tensors", None)
    if tensors is None:
        tensors = getattr(getattr(data, "dataset", None), "tensors", None)
    found = {t.device for t in tensors or () if isinstance(t, torch.Tensor)}
    return found.pop() if len(found) == 1 else None


def flat(group: Group) -> list[torch.Tensor]:
    return [t for inputs, target in group for t in (*inputs, target)]


def unflat(tensors: list[torch.Tensor] | tuple[torch.Tensor, ...], micro_batches: int) -> Group:
    """The inverse of flat: `micro_batches` (inputs..., target) groups from one flat list."""
    width = len(tensors) // micro_batches
    return [(tuple(tensors[i * width:(i + 1) * width - 1]), tensors[(i + 1) * width - 1])
            for i in range(micro_batches)]


def signature(tensors: list[torch.Tensor]) -> tuple:
    return tuple((t.shape, t.dtype, t.device) for t in tensors)


@dataclass
class Job:
    """What every step of a `fit` job needs: its parts, where it runs, and how it steps."""

    model: nn.Module
    net: nn.Module
    """What the step calls: the model, or its DDP wrapper under torchrun."""
    loss_fn: Callable[..., torch.Tensor]
    optimizer: torch.optim.Optimizer
    data: TrainData
    device: torch.device
    autocast: Any
    scaler: torch.amp.GradScaler | None
    dist: DataParallel | None
    epochs: int
    accumulate: int
    record_every: int | None
    total: int
    """Optimizer steps in the whole job."""
    cache_dir: Path
    now: Callable[[], float]
    explain: list[str] = field(default_factory=list)
    """The job's choices, in words, in the order taken (the strategy's explanation)."""


@dataclass
class Replay:
    """A captured step and the state tensors it updates (the model's, the optimizer's), its first arguments."""

    captured: CapturedStep
    state: list[torch.Tensor]


@dataclass
class Compiled:
    """The Inductor-compiled function of K captured steps, its cache key, and its first calls' per-step times."""

    k_steps: Callable[..., torch.Tensor]
    key: str
    calls: list[float] = field(default_factory=list)


class Runner:
    """The steps of one job as they are taken."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.done = 0
        self.counts: dict[str, int] = {}
        self.seconds: dict[str, float] = {}
        self.capture_s = self.compile_s = 0.0
        self.recorder = LossRecorder(job.device)
        self.recorded_steps: list[int] = []
        self.groups = self._iter_groups()
        self.template: Group = []
        """The batch the step was captured on: a batch of its shapes is replayed, any other runs eagerly."""
        self._template_key: tuple[Any, ...] = ()
        self.replay: Replay | None = None
        self.graph: GraphStep | None = None
        self.static: list[torch.Tensor] = []
        """The CUDA graph's input tensors, into which each batch is copied."""
        self.compiled: Compiled | None = None
        self.restore_capturable: list[dict] = []
        """Optimizer param groups made capturable for a CUDA graph, put back at the end."""
        self._capture_loss: torch.Tensor | None = None

    def _iter_groups(self) -> Iterator[tuple[Group, bool]]:
        job = self.job
        for _ in range(job.epochs):
            group: Group = []
            full = True
            for batch, is_full in job.data.epoch():
                group.append(batch)
                full = full and is_full
                if len(group) == job.accumulate:
                    yield group, full
                    group, full = [], True
            if group:
                yield group, False

    def next_group(self) -> tuple[Group, bool]:
        return next(self.groups)

    # ---- the forms of the step ------------------------------------------------------------------
    def use_template(self, group: Group) -> None:
        self.template = group
        self._template_key = signature(flat(group))

    def use_replay(self, replay: Replay) -> None:
        self.replay = replay

    def use_graph(self, graph: GraphStep, static: list[torch.Tensor], restore: list[dict]) -> None:
        self.graph, self.static, self.restore_capturable = graph, static, restore

    def use_compiled(self, compiled: Compiled) -> None:
        self.compiled = compiled

    def add_capture_s(self, seconds: float) -> None:
        self.capture_s += seconds

    def add_compile_s(self, seconds: float) -> None:
        self.compile_s += seconds

    # ---- one step, each runner ---------------------------------------------------------------------
    def eager(self, group: Group, check: bool = False) -> torch.Tensor:
        """One plain optimizer step over `group`'s micro-batches; returns its loss (`check`: the loss is checked
        to be a scalar the job can record: the job's first step)."""
        job = self.job
        job.optimizer.zero_grad(set_to_none=True)
        k = len(group)
        total: torch.Tensor | None = None
        for inputs, target in group:
            weight = share = 1.0
            if job.dist is not None and job.data.loader is None:  # resident data: this rank's rows of the batch
                inputs, target, weight, share = job.dist.rows(inputs, target)
            with job.autocast:
                loss = job.loss_fn(job.net(*inputs), target)
            if check:
                check_loss(loss)
            scaled = loss / k if k > 1 else loss
            if weight != 1.0:
                scaled = scaled * weight
            (job.scaler.scale(scaled) if job.scaler else scaled).backward()
            part = loss.detach().float()
            if job.dist is not None:
                part = part * (share if job.data.loader is None else 1.0 / job.dist.env.world_size)
            total = part if total is None else total + part
        optimizer_step(job.optimizer, job.scaler)
        assert total is not None
        return total / k if k > 1 else total

    def step_of_flat(self, n_state: int, micro_batches: int) -> Callable[..., torch.Tensor]:
        """The eager step with every tensor it touches as an argument (what capture needs): `n_state` state
        tensors, then the batch's tensors of `micro_batches` micro-batches."""
        def step(*args: torch.Tensor) -> torch.Tensor:
            loss = self.eager(unflat(args[n_state:], micro_batches))
            self._capture_loss = loss.detach()
            return loss
        return step

    def captured_loss(self) -> torch.Tensor:
        """The loss of the real step the capture ran."""
        assert self._capture_loss is not None
        return self._capture_loss

    def record(self, first_step: int, losses: torch.Tensor) -> None:
        """Record the losses of steps first_step, first_step+1, ... that fall on record_every."""
        every = self.job.record_every
        if every is None:
            return
        n = losses.numel()
        steps = [s for s in range(first_step, first_step + n) if s % every == 0]
        if not steps:
            return
        if len(steps) == n:
            self.recorder.add(losses)
        else:
            self.recorder.add(losses.reshape(-1)[[s - first_step for s in steps]])
        self.recorded_steps.extend(steps)

    def took(self, runner: str, n: int, losses: torch.Tensor) -> None:
        """`n` steps were taken by `runner` outside `run_one` (a capture's real steps, K compiled ones): counted,
        and their losses recorded."""
        first_step = self.done + 1
        self.done += n
        self.counts[runner] = self.counts.get(runner, 0) + n
        self.record(first_step, losses)

    def run_one(self, runner: str, group: Group, check: bool = False) -> float:
        """One optimizer step by `runner`; returns its host wall time."""
        start = self.job.now()
        if runner == "eager":
            loss = self.eager(group, check)
        elif runner == "replay":
            assert self.replay is not None
            with torch.no_grad():
                loss = self.replay.captured.replay(*self.replay.state, *flat(group))
        else:  # graph
            for static, t in zip(self.static, flat(group)):
                if static is not t:
                    static.copy_(t)
            graph = self.graph
            assert graph is not None and graph.graph is not None and graph.loss is not None  # a failed capture is
            graph.graph.replay()                                                               # never kept
            loss = graph.loss.clone()
        elapsed = self.job.now() - start
        self.spent(runner, elapsed)
        self.done += 1
        self.counts[runner] = self.counts.get(runner, 0) + 1
        self.record(self.done, loss)
        return elapsed

    def spent(self, runner: str, seconds: float) -> None:
        self.seconds[runner] = self.seconds.get(runner, 0.0) + seconds

    def fits_capture(self, group: Group, full: bool) -> bool:
        return full and len(group) == len(self.template) and signature(flat(group)) == self._template_key

    def time_window(self, runner: str, steps: int, target: int) -> float:
        """Per-step seconds over a window with the device synchronised at both ends (CUDA probes)."""
        job = self.job
        sync(job.device)
        start, n = job.now(), 0
        while n < steps and self.done < target:
            group, full = self.next_group()
            self.run_one(runner if runner == "eager" or self.fits_capture(group, full) else "eager", group)
            n += 1
        sync(job.device)
        return (job.now() - start) / max(n, 1)

    # ---- the hot loops -----------------------------------------------------------------------------
    def replay_resident(self, target: int) -> None:
        """The hot loop: the same resident full batch every step, nothing but the replay and the record."""
        assert self.replay is not None
        n = target - self.done
        args = [*self.replay.state, *flat(self.template)]
        replay, add, every, first = self.replay.captured.replay, self.recorder.add, self.job.record_every, self.done + 1
        start = self.job.now()
        with torch.no_grad():
            if every == 1:
                for _ in range(n):
                    add(replay(*args))
            else:
                for step in range(first, first + n):
                    loss = replay(*args)
                    if every is not None and step % every == 0:
                        add(loss)
        self.spent("replay", self.job.now() - start)
        if every is not None:
            self.recorded_steps.extend(s for s in range(first, first + n) if s % every == 0)
        for _ in range(n):  # keep the data iterator in step with the steps taken
            self.next_group()
        self.done += n
        self.counts["replay"] = self.counts.get("replay", 0) + n

    def compiled_resident(self, target: int) -> None:
        """The compiled hot loop: K steps per call on the resident full batch."""
        assert self.replay is not None and self.compiled is not None
        k = STEPS_PER_CALL
        calls = (target - self.done) // k
        args = [*self.replay.state, *(flat(self.template) * k)]
        first = self.done + 1
        timed = min(calls, COMPILED_TIMED_CALLS - len(self.compiled.calls))
        for i in range(timed):
            self.record(first + i * k, self.call_compiled(args))
        fn, add, every = self.compiled.k_steps, self.recorder.add, self.job.record_every
        start = self.job.now()
        for i in range(timed, calls):
            losses = fn(*args)
            if every == 1:
                add(losses)
            elif every is not None:
                self.record(first + i * k, losses)
        self.spent("compiled", self.job.now() - start)
        if every == 1:
            self.recorded_steps.extend(range(first + timed * k, first + calls * k))
        for _ in range(calls * k):
            self.next_group()
        self.done += calls * k
        self.counts["compiled"] += calls * k

    def call_compiled(self, args: list[torch.Tensor]) -> torch.Tensor:
        """One timed call of K compiled steps; the first few after the compile give the step time."""
        compiled = self.compiled
        assert compiled is not None
        start = self.job.now()
        losses = compiled.k_steps(*args)
        elapsed = self.job.now() - start
        self.spent("compiled", elapsed)
        if len(compiled.calls) < COMPILED_TIMED_CALLS:
            compiled.calls.append(elapsed / STEPS_PER_CALL)
            if len(compiled.calls) == COMPILED_TIMED_CALLS:
                self._note_compiled(compiled)
        return losses

    def _note_compiled(self, compiled: Compiled) -> None:
        step_s = statistics.median(compiled.calls)
        save_times(self.job.cache_dir, compiled.key, self.compile_s, step_s)
        self.job.explain.append(f"compiled {STEPS_PER_CALL} steps per call: {plan.duration(step_s)} per step, compile "
                                f"{self.compile_s:.1f} s (measured)")
