"""How fast this CPU multiplies matrices: the rate a step's arithmetic could run at."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def cpu_matmul_gflops(n: int = 256, repeats: int = 5, inner: int = 10,
                      now: Callable[[], float] = time.perf_counter) -> float:
    """Median GFLOP/s of an n x n float32 matmul on the CPU with torch's current threads."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    with torch.no_grad():
        for _ in range(3):
            torch.mm(a, b)
        rates = []
        for _ in range(repeats):
            t0 = now()
            for _ in range(inner):
                torch.mm(a, b)
            rates.append(2 * n**3 * inner / (now() - t0) / 1e9)
    return statistics.median(rates)
