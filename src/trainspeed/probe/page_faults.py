"""What one minor page fault costs this process: the system finding a page, zeroing it and mapping it.

A fresh anonymous mapping is filled by torch (each page's first write a fault, taken inside the kernel's writes as
a training step's ops take theirs), then filled again (no faults: the writing's own cost); the faults are counted by
the system (`resource.getrusage`), not assumed, so a system that hands out huge pages (one fault zeroing 2 MiB) is
measured as it is. The least of a few readings: a moment of a shared machine only adds. (Touching each page from a
Python loop instead read 2.8 us a fault on the 2-vCPU CI machine where torch's fill reads 1.4 us: the loop's own
work slows down beside the faults.)
"""

from __future__ import annotations

import mmap
import time
from collections.abc import Callable

import torch

from trainspeed.watch.run_queue import less_wait, probe_waits

SIZE = 64 * 2**20


def minor_faults() -> int | None:
    """This process's minor page faults so far (None: not readable here, as on Windows)."""
    try:
        import resource
    except ImportError:
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def page_fault_us(size: int = SIZE, repeats: int = 5, waited: Callable[[], float] | None = None) -> float | None:
    """Microseconds per minor page fault on fresh anonymous memory; None where the faults cannot be counted
    (Windows) or none happened. Each fill's time is its wall time less its threads' share of their wait for a core
    (`waited`: seconds since its last call; by default Linux's run-queue counts): beside two busy processes a fill
    that lost its core for a scheduler slice read the fault several times dearer, and `page_faults` outranked the
    script's own problem."""
    if minor_faults() is None:
        return None
    threads = torch.get_num_threads()
    best: float | None = None
    with probe_waits(waited) as wait:
        for _ in range(repeats):
            with mmap.mmap(-1, size) as m:
                t = torch.frombuffer(m, dtype=torch.uint8)
                wait()
                f0, t0 = minor_faults() or 0, time.perf_counter()
                t.fill_(1)
                t1, f1 = time.perf_counter(), minor_faults() or 0
                w1 = wait()
                t.fill_(2)
                t2 = time.perf_counter()
                w2 = wait()
                del t  # the mapping closes only without views of it
            if f1 > f0:
                faulting, writing = less_wait(t1 - t0, w1, threads), less_wait(t2 - t1, w2, threads)
                us = max(0.0, faulting - writing) * 1e6 / (f1 - f0)
                best = us if best is None else min(best, us)
    return best
