"""The cost of dispatching one tiny op on this CPU: the floor under every eager PyTorch op."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def cpu_dispatch_us(repeats: int = 7, ops: int = 2000, now: Callable[[], float] = time.perf_counter) -> float:
    """Median microseconds per `torch.add` of two one-element CPU tensors (Python call included).

    On such tensors the arithmetic is nothing; what is left is argument parsing, dispatch and
    allocation of the result - the per-op overhead a tiny model pays for every op.
    """
    a, b = torch.ones(1), torch.ones(1)
    with torch.no_grad():
        for _ in range(200):  # warm the allocator and the dispatcher's caches
            torch.add(a, b)
        samples = []
        for _ in range(repeats):
            t0 = now()
            for _ in range(ops):
                torch.add(a, b)
            samples.append((now() - t0) / ops * 1e6)
    return statistics.median(samples)
