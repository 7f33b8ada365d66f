"""The cost of one tiny op, on this CPU and on a CUDA device: the floor under every eager PyTorch op.

On the CPU that floor is argument parsing, dispatch and allocation. On CUDA the same op also
launches a kernel: the difference between the two is what each kernel launch costs the host.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from trainspeed.load.probes import less_wait, probe_waits


def tiny_op_us(device: str = "cpu", repeats: int = 7, ops: int = 2000,
               now: Callable[[], float] = time.perf_counter, waited: Callable[[], float] | None = None) -> float:
    """Microseconds per `torch.add` of two one-element tensors on `device` (Python call included): the least of
    `repeats` timed batches of `ops`.

    On such tensors the arithmetic is nothing; what is left is the per-op overhead a tiny model pays for every op. On
    CUDA the device is synchronised before and after each timed batch of ops, so a queue that falls behind the host is
    counted, not hidden. The least batch, not the median: this is a floor, and other processes' load only adds to it
    (BENCHMARKS.md, "Where the code's constants come from"), as `timeit` takes the least of its repeats. Each batch's
    time is also less the time its thread waited for a core (`waited`: seconds since its last call; by default Linux's
    run-queue count of this thread, the one that runs the tiny ops): beside busy processes every batch may have lost its
    core for a scheduler slice."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    a, b = torch.ones(1, device=device), torch.ones(1, device=device)
    with torch.no_grad():
        for _ in range(200):  # warm the allocator and the dispatcher's caches
            torch.add(a, b)
        samples = []
        with probe_waits(waited, native=False) as wait:  # the tiny ops run on this thread alone
            for _ in range(repeats):
                sync()
                wait()
                t0 = now()
                for _ in range(ops):
                    torch.add(a, b)
                sync()
                samples.append(less_wait(now() - t0, wait()) / ops * 1e6)
    return min([s for s in samples if s > 0] or samples)


def cpu_dispatch_us(repeats: int = 7, ops: int = 2000, now: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per tiny CPU op (the least of its batches): argument parsing, dispatch and allocation of the
    result."""
    return tiny_op_us("cpu", repeats, ops, now)


def cuda_op_us(repeats: int = 7, ops: int = 2000, now: Callable[[], float] = time.perf_counter) -> float | None:
    """Microseconds per tiny CUDA op (dispatch plus one kernel launch; the least of its batches); None without
    CUDA."""
    if not torch.cuda.is_available():
        return None
    return tiny_op_us("cuda", repeats, ops, now)
