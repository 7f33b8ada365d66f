"""The cost of one tiny op, on this CPU and on a CUDA device: the floor under every eager PyTorch op.

On the CPU that floor is argument parsing, dispatch and allocation. On CUDA the same op also
launches a kernel: the difference between the two is what each kernel launch costs the host.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def tiny_op_us(device: str = "cpu", repeats: int = 7, ops: int = 2000,
               now: Callable[[], float] = time.perf_counter) -> float:
    """Median microseconds per `torch.add` of two one-element tensors on `device` (Python call included).

    On such tensors the arithmetic is nothing; what is left is the per-op overhead a tiny model
    pays for every op. On CUDA the device is synchronised before and after each timed batch of
    ops, so a queue that falls behind the host is counted, not hidden.
    """
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    a, b = torch.ones(1, device=device), torch.ones(1, device=device)
    with torch.no_grad():
        for _ in range(200):  # warm the allocator and the dispatcher's caches
            torch.add(a, b)
        samples = []
        for _ in range(repeats):
            sync()
            t0 = now()
            for _ in range(ops):
                torch.add(a, b)
            sync()
            samples.append((now() - t0) / ops * 1e6)
    return statistics.median(samples)


def cpu_dispatch_us(repeats: int = 7, ops: int = 2000, now: Callable[[], float] = time.perf_counter) -> float:
    """Median microseconds per tiny CPU op: argument parsing, dispatch and allocation of the result."""
    return tiny_op_us("cpu", repeats, ops, now)


def cuda_op_us(repeats: int = 7, ops: int = 2000, now: Callable[[], float] = time.perf_counter) -> float | None:
    """Median microseconds per tiny CUDA op (dispatch plus one kernel launch); None without CUDA."""
    if not torch.cuda.is_available():
        return None
    return tiny_op_us("cuda", repeats, ops, now)
