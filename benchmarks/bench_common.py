"""What the benchmarks print and do alike: the machine they ran on, and two arms alternated round by round."""

from __future__ import annotations

import datetime
import random
import statistics
from collections.abc import Callable

from trainspeed.hardware.report import HardwareReport


def measured_on(hw: HardwareReport, device: str = "cpu") -> str:
    """"Measured <date> on <CPU> (<generation>, <n> threads)", and the GPU with its driver where the run trained
    on one: the start of each benchmark's first line."""
    where = (f"Measured {datetime.date.today()} on {hw.cpu.model} ({hw.cpu.microarchitecture}, "
             f"{hw.cpu.logical_threads} threads)")
    if device == "cuda" and hw.gpu.gpus:
        gpu = hw.gpu.gpus[0]
        where += f", {gpu.name} (driver {gpu.driver}, CUDA {gpu.cuda}), torch {hw.torch_version}"
    return where


def alternated(rounds: int, given: Callable[[], float], advised: Callable[[], float]) -> tuple[list[float], list[float]]:
    """Each arm's times over `rounds` rounds, the arms run in turn (a slow moment of the machine hits both alike)."""
    first: list[float] = []
    second: list[float] = []
    for _ in range(rounds):
        first.append(given())
        second.append(advised())
    return first, second


def speedup(given: list[float], advised: list[float]) -> str:
    """"speed-up <median>x [<least>x, <most>x]" of the round by round ratios given / advised."""
    ratios = [a / b for a, b in zip(given, advised)]
    return f"speed-up {statistics.median(ratios):.2f}x [{min(ratios):.2f}x, {max(ratios):.2f}x]"


def bootstrap_interval(values: list[float], statistic: Callable[[list[float]], float], resamples: int,
                       seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval of `statistic` over `values` (percentile method, seeded: the same values give the
    same interval)."""
    rng = random.Random(seed)
    draws = sorted(statistic(rng.choices(values, k=len(values))) for _ in range(resamples))
    return draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1]
