"""A training step's time at two intra-op thread counts: what more threads than cores cost a step, as a matmul alone
does not show.

A matmul repeated back to back keeps its threads busy; a training step runs many parallel ops in turn (matrix products,
then elementwise ops, reductions, the optimizer's), and each one waits for all of its threads to get a core: with more
threads than cores a training step slows far more than a matmul of its size (BENCHMARKS.md, "Where the code's constants
come from")."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from trainspeed.probe.matmul import ROUND_PAUSE_S, _rounds_apart
from trainspeed.threads import intra_op_threads

STEPS = 8
"""Timed steps per reading (after two untimed): each reading is their median."""


LOADED_S = 0.3
"""Seconds of steps in each reading beside busy processes (`loaded_step_ms`): several scheduler slices."""
LOADED_STEPS = 3
"""Timed steps in each such reading at least (a wide step may take longer than LOADED_S)."""


def _mlp(side: int) -> Callable[[], None]:
    """One training step of Linear(side, side), ReLU, Linear(side, side) on `side` rows, with SGD, on the CPU."""
    model = nn.Sequential(nn.Linear(side, side), nn.ReLU(), nn.Linear(side, side))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(side, side), torch.randn(side, side)

    def step() -> None:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


def _step_ms(side: int, now: Callable[[], float] = time.perf_counter) -> float:
    """Median milliseconds of a training step of the probe's MLP (`_mlp`) with torch's current threads."""
    step = _mlp(side)
    times = []
    for i in range(STEPS + 2):
        t0 = now()
        step()
        if i >= 2:
            times.append((now() - t0) * 1e3)
    return statistics.median(times)


def _mean_step_ms(side: int, seconds: float = LOADED_S, now: Callable[[], float] = time.perf_counter) -> float:
    """Mean milliseconds of the probe MLP's training steps (`_mlp`) with torch's current threads, over `seconds` of
    them (LOADED_STEPS at least), after two untimed."""
    step = _mlp(side)
    step()
    step()
    t0, done = now(), 0
    while done < LOADED_STEPS or now() - t0 < seconds:
        step()
        done += 1
    return (now() - t0) * 1e3 / done


def thread_step_ms(side: int, threads: tuple[int, int], rounds: int = 3, pause: Callable[[float], None] = time.sleep,
                   pause_s: float = ROUND_PAUSE_S) -> tuple[float, float]:
    """Milliseconds of a small MLP's training step with matrices of `side` (the run's, `rules.matmul_side`) at each of
    two thread counts (as the run had them, as advised), measured in turn, `rounds` times `pause_s` apart; each
    count's fastest."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in _rounds_apart(rounds, pause, pause_s):
        for count, into in zip(threads, times):
            with intra_op_threads(count):
                into.append(_step_ms(side))
    return min(times[0]), min(times[1])


def loaded_step_ms(side: int, threads: tuple[int, int], rounds: int = 3) -> tuple[float, float]:
    """Milliseconds of the probe MLP's training step at each of two thread counts (as the run had them, as advised)
    beside the processes that share the cores now: each count's mean step over LOADED_S of steps, measured in turn
    `rounds` times; each count's median round. Beside busy processes a step loses a scheduler slice now and then, which
    its median and the fastest step leave out: beside busy processes the fastest median read the two counts nearly alike
    where the script's own run went several times faster at one thread (BENCHMARKS.md, "Where the code's constants come
    from")."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for count, into in zip(threads, times):
            with intra_op_threads(count):
                into.append(_mean_step_ms(side))
    return statistics.median(times[0]), statistics.median(times[1])
