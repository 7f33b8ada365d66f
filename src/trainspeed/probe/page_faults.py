"""What one minor page fault costs this process: the system finding a page, zeroing it and mapping it.

A fresh anonymous mapping is filled by torch (each page's first write a fault, taken inside the kernel's writes as a
training step's ops take theirs), then filled again (no faults: the writing's own cost); the faults are counted by the
system (`resource.getrusage`), not assumed, so a system that hands out huge pages (one fault zeroing 2 MiB) is measured
as it is. The least of a few readings: a moment of a shared machine only adds. (Touching each page from a Python loop
instead reads a fault about twice as dear as torch's fill does: the loop's own work slows down beside the faults;
BENCHMARKS.md, "Where the code's constants come from".)"""

from __future__ import annotations

import mmap
import time
from collections.abc import Callable, Iterator

import torch

try:
    import resource
except ImportError:  # Windows: no counts of page faults
    resource = None  # type: ignore[assignment]

from trainspeed.load.probes import FREE_CORE, probe_waits
from trainspeed.probe.readings import ProbeRun
from trainspeed.threads import intra_op_threads

SIZE = 64 * 2**20


def minor_faults() -> int | None:
    """This process's minor page faults so far (None: not readable here, as on Windows). Read on each optimizer step
    the hooks time: the module is imported once."""
    if resource is None:
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def faults_since(start: int) -> int:
    """Minor page faults taken since this process had taken `start` (a `minor_faults()` reading)."""
    return max(0, (minor_faults() or start) - start)


def _fills(size: int, repeats: int, now: Callable[[], float],
           wait: Callable[[], float]) -> Iterator[tuple[int, float, float, float, float]]:
    """`repeats` readings of a fresh mapping of `size` bytes filled by torch (its pages' first writes faulting), then
    filled again (no faults): (faults, the faulting fill's seconds and its wait for a core, the rewrite's seconds and
    its wait), by `now`'s clock, for the readings in which the system counted faults."""
    for _ in range(repeats):
        with mmap.mmap(-1, size) as m:
            t = torch.frombuffer(m, dtype=torch.uint8)
            wait()
            f0, t0 = minor_faults() or 0, now()
            t.fill_(1)
            t1, f1 = now(), minor_faults() or 0
            w1 = wait()
            t.fill_(2)
            t2 = now()
            w2 = wait()
            del t  # the mapping closes only without views of it
        if f1 > f0:
            yield f1 - f0, t1 - t0, w1, t2 - t1, w2


def _one_thread_us(size: int, repeats: int) -> float | None:
    """CPU microseconds one minor page fault costs the thread that takes it: the same fills on one intra-op thread,
    timed by its CPU time (the system's work on a fault is charged to the faulting thread), which no wait for a core
    stretches; the least of `repeats`. None where no fill faulted."""
    with intra_op_threads(1):
        return min((max(0.0, faulting - writing) * 1e6 / faults
                    for faults, faulting, _, writing, _ in _fills(size, repeats, time.thread_time, lambda: 0.0)),
                   default=None)


def page_fault_us(size: int = SIZE, repeats: int = 5, waited: Callable[[], float] | None = None) -> float | None:
    """Microseconds per minor page fault on fresh anonymous memory, at torch's threads; None where the faults cannot be
    counted (Windows) or none happened. The readings whose fills waited for a core FREE_CORE of their time or less
    (`waited`: seconds since its last call; by default Linux's run-queue counts of this thread and torch's intra-op
    threads) give the least of their wall times' difference per fault. Where every reading waited (other processes hold
    the cores), the CPU time one fault costs its thread (`_one_thread_us`) over torch's threads: the least a fault costs
    the step, faults taken on every thread at once. Each reading less its threads' share of their wait read far under
    alone's beside busy processes, where one thread's CPU time read as alone (BENCHMARKS.md, "Where the code's constants
    come from"). A fill that lost its core for a scheduler slice once read the fault several times dearer, and
    `page_faults` outranked the script's own problem."""
    if minor_faults() is None:
        return None
    with probe_waits(waited) as wait:
        readings = list(_fills(size, repeats, time.perf_counter, wait))
    free = [max(0.0, faulting - writing) * 1e6 / faults for faults, faulting, w1, writing, w2 in readings
            if w1 <= FREE_CORE * faulting and w2 <= FREE_CORE * writing]  # on free cores
    if free or not readings:
        return min(free, default=None)
    cpu = _one_thread_us(size, repeats)
    return cpu / max(1, torch.get_num_threads()) if cpu is not None else None


def for_run(run: ProbeRun) -> float | None:
    """The `page_faults` rule's probe (`rules.memory.PROBES`): what one minor page fault costs here."""
    return page_fault_us()
