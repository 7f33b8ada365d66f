"""The machine's facts beside the run's own, read at the two ends of the measured steps: what the DataLoader's worker
processes cost, torch.compile's compilations, and the process's minor page faults.

The DataLoader's worker processes' cost is their CPU seconds (the children's, reaped or running) over the batches the
loaders with workers handed out between the two marks. The marks hold torch.compile's compilations so far too
(`compiles`), and this process's minor page faults (`page_faults`): each is a page of memory the system handed the
process afresh and zeroed, which a step pays for again when its allocator gives large freed blocks back to the
system and asks for them anew (the standard library's `resource`; not on Windows). Other processes' load and the
threads' waits for a core are the load's (`trainspeed.load`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psutil

from trainspeed.load.marks import own_and_children_s
from trainspeed.probe.page_faults import minor_faults
from trainspeed.watch.compiles import compiled_so_far
from trainspeed.watch.result import Compiles, Machine, WorkerCpu


@dataclass(frozen=True)
class MachineMark:
    at: float
    """time.monotonic() seconds."""
    children_s: float = 0.0
    """CPU seconds this process's children have run, reaped or running (the DataLoader's worker processes among
    them)."""
    worker_batches: int = 0
    """Batches handed out so far by the DataLoaders that have worker processes."""
    compiles: tuple[int, float] = (0, 0.0)
    """torch.compile's graphs compiled so far in this process, and the seconds spent on them."""
    steps: int = 0
    """Training steps seen so far."""
    minor_faults: int | None = None
    """This process's minor page faults so far (None: not readable here)."""


def mark(worker_batches: int = 0, steps: int = 0) -> MachineMark | None:
    """The counters now, with the batches the loaders with workers have handed out and the steps seen; None where
    psutil cannot read them."""
    try:
        _, children, _ = own_and_children_s()
        return MachineMark(time.monotonic(), children, worker_batches, compiled_so_far(), steps, minor_faults())
    except (psutil.Error, OSError):
        return None


WORKER_BATCHES = 8
"""Batches from loaders with workers below which their CPU per batch is not worked out (a worker's start would be
most of it)."""


def worker_cpu(start: MachineMark | None, end: MachineMark | None) -> WorkerCpu | None:
    """What the DataLoader's worker processes ran per batch between two marks (None: no such loader, too few
    batches, or the counters unread)."""
    if start is None or end is None or end.worker_batches - start.worker_batches < WORKER_BATCHES:
        return None
    batches = end.worker_batches - start.worker_batches
    return WorkerCpu(batches, max(0.0, end.children_s - start.children_s) * 1e3 / batches)


def compiled(start: MachineMark | None, end: MachineMark | None) -> Compiles | None:
    """torch.compile's compilations between two marks (None: none, or the counters unread)."""
    if start is None or end is None or end.compiles[0] <= start.compiles[0]:
        return None
    return Compiles(end.compiles[0] - start.compiles[0], max(0.0, end.compiles[1] - start.compiles[1]))


def _faults_per_step(start: tuple[int, int | None], end: tuple[int, int | None]) -> float | None:
    """Minor page faults per step between two (steps seen, faults so far) readings (None: unread, or no step)."""
    (steps0, faults0), (steps1, faults1) = start, end
    if faults0 is None or faults1 is None or steps1 <= steps0:
        return None
    return max(0, faults1 - faults0) / (steps1 - steps0)


def page_faults(start: MachineMark | None, end: MachineMark | None) -> float | None:
    """This process's minor page faults per step between two marks (None: unread, or no step between them)."""
    if start is None or end is None:
        return None
    return _faults_per_step((start.steps, start.minor_faults), (end.steps, end.minor_faults))


def early_page_faults(marks: list[tuple[int, int | None]]) -> float | None:
    """Minor page faults per step between the first two (steps seen, faults) marks (None: fewer, or unread)."""
    return _faults_per_step(marks[0], marks[1]) if len(marks) >= 2 else None


class MachineTracker:
    """The machine's counters at the two ends of the measured steps, and the page faults of the warm-up."""

    def __init__(self) -> None:
        self.start: MachineMark | None = None
        self.end: MachineMark | None = None
        """The counters as the measured steps started and as the watch stopped."""
        self.early_faults: list[tuple[int, int | None]] = []
        """(steps seen, minor page faults) as the first step ended and as the last step before the profiler window
        ended: the warm-up's steady steps, before the window's memory and the detailed runs' can move where glibc's
        heap ends (BENCHMARKS.md, "Memory the allocator hands back every step")."""

    def measuring(self, worker_batches: int, steps: int) -> None:
        """The measured steps start now."""
        self.start = mark(worker_batches, steps)

    def stopped(self, worker_batches: int, steps: int) -> None:
        if self.start is not None:
            self.end = mark(worker_batches, steps)

    def early(self, steps: int) -> None:
        self.early_faults.append((steps, minor_faults()))

    def part(self) -> Machine:
        start, end = self.start, self.end
        return Machine(worker_cpu(start, end), page_faults(start, end), early_page_faults(self.early_faults),
                       compiled(start, end))
