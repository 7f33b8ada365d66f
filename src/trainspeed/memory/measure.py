"""Measure the real peak of a steady-state training step, to check the estimate against.

Both devices count the same thing: the bytes live before the step that belong to the training
(parameters, buffers, optimizer state, counted storage by storage) plus the most the step adds on
top of everything live before it. Tensors the process holds for other reasons (another model, an
earlier run's leftovers) are not the step's, and are not counted.
CUDA: the step's rise is torch.cuda.max_memory_allocated less memory_allocated just before it.
cuBLAS's workspaces are freed first, so the step allocates its own again and counts it, as the
estimate does. CPU: the allocator events of torch.profiler(profile_memory=True); their running
total is process-wide, so the step's own allocations are summed from its start.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trainspeed._io import quiet_fd2
from trainspeed.memory.allocations import allocation_peak, profiler_allocations
from trainspeed.memory.checkpointing import apply_checkpointing
from trainspeed.memory.cuda_workspaces import free_cublas_workspaces
from trainspeed.memory.optimizers import OptimizerFactory, optimizer_factory
from trainspeed.memory.result import MeasuredPeak
from trainspeed.memory.step import (
    InputArg,
    ModelArg,
    StepSetup,
    default_loss,
    input_maker,
    state_tensors,
    training_step,
)


def _unique_bytes(tensors: list[torch.Tensor]) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[id(s)] = s.nbytes()
    return sum(seen.values())


def build_real(model: ModelArg, device: torch.device, checkpointing: bool) -> nn.Module:
    """The real model on the device (a factory is called; a module is copied, never trained itself)."""
    built = copy.deepcopy(model) if isinstance(model, nn.Module) else model()
    if not isinstance(built, nn.Module):
        raise TypeError(f"the model factory returned {type(built).__name__}, not an nn.Module")
    built = built.to(device).train()
    if checkpointing:
        apply_checkpointing(built)
    return built


def step_peak(run_step: Callable[[], Any], held: list[torch.Tensor], device: torch.device) -> MeasuredPeak:
    """Measured peak bytes while `run_step()` runs once; `held` are the tensors alive before it
    (parameters, buffers, optimizer state: counted storage by storage)."""
    before = _unique_bytes(held)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        free_cublas_workspaces()  # the step then allocates its workspaces again, and they are counted
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        run_step()
        torch.cuda.synchronize(device)
        rise = torch.cuda.max_memory_allocated(device) - start
        return MeasuredPeak(before + int(rise), str(device), "torch.cuda.max_memory_allocated")
    with quiet_fd2(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                 profile_memory=True) as prof:
        run_step()
    return MeasuredPeak(before + allocation_peak(profiler_allocations(prof)), str(device),
                        "torch.profiler allocator events")


def measure_step_peak(model: nn.Module, optimizer: torch.optim.Optimizer, setup: StepSetup, batch: int,
                      device: torch.device) -> MeasuredPeak:
    """Run one warm-up step (creates optimizer state), then measure the next one."""
    training_step(model, optimizer, setup, batch, device)
    held = list(model.parameters()) + list(model.buffers()) + state_tensors(optimizer)
    return step_peak(lambda: training_step(model, optimizer, setup, batch, device), held, device)


def measure_memory(model: ModelArg, example_input: InputArg, batch_size: int,
                   optimizer: str | OptimizerFactory = "adam", amp: str | None = None,
                   checkpointing: bool = False, loss: Callable[[Any], torch.Tensor] | None = None,
                   device: str | torch.device = "cpu") -> MeasuredPeak:
    """Measured peak of a steady-state step with the same setup as estimate_memory()."""
    target = torch.device(device)
    _, factory = optimizer_factory(optimizer, target.type)
    setup = StepSetup(input_maker(example_input), loss or default_loss, amp, target.type)
    with torch.random.fork_rng(devices=[target] if target.type == "cuda" else []):
        real = build_real(model, target, checkpointing)
        opt = factory(real.parameters())
        return measure_step_peak(real, opt, setup, batch_size, target)


def _is_oom(error: BaseException) -> bool:
    return isinstance(error, torch.cuda.OutOfMemoryError) or "out of memory" in str(error).lower()


def confirm_max_batch(measure: Callable[[int], MeasuredPeak], start: int, usable_bytes: int,
                      per_sample_bytes: float, max_trials: int = 8) -> tuple[int | None, list[tuple[int, bool, int | None]], bool]:
    """Confirm the largest fitting batch with real steps, from the estimate's answer up or down.

    `measure(b)` runs real steps; an out-of-memory error counts as "does not fit" and is
    recovered from (cache emptied). The next trial aims where the measured peaks' line crosses
    the budget, so few trials are needed. Returns (largest batch seen to fit, trials, confirmed),
    where confirmed means b fitted and b + 1 did not, both measured."""
    trials: list[tuple[int, bool, int | None]] = []
    peaks: dict[int, int] = {}

    def fits(b: int) -> bool:
        try:
            peak: int | None = measure(b).peak_bytes
        except Exception as e:
            if not _is_oom(e):
                raise
            peak = None
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        ok = peak is not None and peak <= usable_bytes
        trials.append((b, ok, peak))
        if peak is not None:
            peaks[b] = peak
        return ok

    def slope() -> float:
        if len(peaks) >= 2:
            (b1, p1), (b2, p2) = min(peaks.items()), max(peaks.items())
            if b2 > b1 and p2 > p1:
                return (p2 - p1) / (b2 - b1)
        return per_sample_bytes

    def aim(b: int) -> int:
        """Where the line through the last measured peak crosses the budget."""
        s = slope()
        if b not in peaks or s <= 0:
            return b // 2 if b not in peaks else b + 1
        return b + int((usable_bytes - peaks[b]) // s)

    lo: int | None = None
    hi: int | None = None
    b = max(1, start)
    while len(trials) < max_trials:
        if fits(b):
            lo = b
        else:
            hi = b
            if b == 1:
                break
        if lo is not None and hi is not None and hi - lo <= 1:
            break
        nxt = aim(b)
        low_bound = lo + 1 if lo is not None else 1
        high_bound = hi - 1 if hi is not None else max(nxt, b + 1)
        b = min(max(nxt, low_bound), high_bound)
        if lo is not None and b == lo:
            b = lo + 1
    confirmed = lo is not None and hi is not None and hi == lo + 1
    return lo, trials, confirmed
