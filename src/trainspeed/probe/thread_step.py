"""A training step's time at two intra-op thread counts: what more threads than cores cost a step, as a matmul
alone does not show.

A matmul repeated back to back keeps its threads busy; a training step runs many parallel ops in turn (matrix
products, then elementwise ops, reductions, the optimizer's), and each one waits for all of its threads to get a
core. With 8 threads on 2 cores, examples/too_many_threads.py's MLP step ran 2.5x as long as with 2, where a
matmul of its size ran 1.4x as slow (2026-11-27, the 2-vCPU Intel Xeon VM).
"""

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


def _step_ms(side: int, now: Callable[[], float] = time.perf_counter) -> float:
    """Median milliseconds of a training step of Linear(side, side), ReLU, Linear(side, side) on `side` rows, with
    SGD, on the CPU with torch's current threads."""
    model = nn.Sequential(nn.Linear(side, side), nn.ReLU(), nn.Linear(side, side))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(side, side), torch.randn(side, side)
    times = []
    for i in range(STEPS + 2):
        t0 = now()
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i >= 2:
            times.append((now() - t0) * 1e3)
    return statistics.median(times)


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
