"""How much of the machine's CPU other processes used while the run was measured.

A process that is not the watched one (another training run, a browser, a compile) takes cores
that torch's intra-op threads count on. An intra-op parallel region waits for its slowest thread,
and a thread that lost its core to another process waits a scheduler slice (4 ms on the 2-vCPU VM).
The seed's loop beside two busy processes there: 2 threads, median step 0.56 ms but a p90 of 4.9 ms,
2.15 s in all; 1 thread, 0.39 ms and 0.70 ms, 0.43 s (600 steps, 2026-11-23).

Read from cumulative counters at the two ends (psutil: the system's CPU times, this process's and
its children's), so a run of a second is measured as well as one of an hour. "Ours" takes in the
DataLoader's worker processes (children) and the intra-op threads that spin while they wait, and under torchrun the
job's other ranks on this node (the launcher's other workers and their children): a rank is the job, not another
process beside it. A hypervisor's steal time is not another process of this machine, and not counted.

The same counters give what the DataLoader's worker processes cost: their CPU seconds (the children's, reaped or
running) over the batches the loaders with workers handed out between the two marks. The marks hold torch.compile's
compilations so far too (`compiles`), and this process's minor page faults (`page_faults`): each is a page of memory
the system handed the process afresh and zeroed, which a step pays for again when its allocator gives large freed
blocks back to the system and asks for them anew (the standard library's `resource`; not on Windows).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from trainspeed.probe.page_faults import minor_faults
from trainspeed.watch.compiles import compiled_so_far
from trainspeed.watch.result import Compiles, Machine, WorkerCpu
from trainspeed.watch.run_queue import process_wait_s, steal_s


@dataclass(frozen=True)
class LoadMark:
    at: float
    """time.monotonic() seconds."""
    busy_s: float
    """CPU seconds the whole machine has run (every CPU, without idle, iowait and steal)."""
    ours_s: float
    """CPU seconds this process and its children have run, reaped children included (and the job's other local
    ranks, under torchrun)."""
    children_s: float = 0.0
    """Of those, its children's (the DataLoader's worker processes among them)."""
    worker_batches: int = 0
    """Batches handed out so far by the DataLoaders that have worker processes."""
    compiles: tuple[int, float] = (0, 0.0)
    """torch.compile's graphs compiled so far in this process, and the seconds spent on them."""
    steps: int = 0
    """Training steps seen so far."""
    minor_faults: int | None = None
    """This process's minor page faults so far (None: not readable here)."""
    threads_wait_s: float | None = None
    """Run-queue wait so far of the process's threads, summed (`run_queue.process_wait_s`; None: unread)."""
    steal_s: float | None = None
    """The VM's steal time so far, all CPUs together (None: not said here)."""


def _cpu_s(process: psutil.Process) -> float:
    try:
        c = process.cpu_times()
    except psutil.Error:  # it ended between the listing and the read
        return 0.0
    return c.user + c.system


def siblings(me: psutil.Process) -> list[psutil.Process]:
    """Under torchrun on this node: the job's other ranks (the launcher's other workers) and their children."""
    if int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1) < 2 or "TORCHELASTIC_RUN_ID" not in os.environ:
        return []
    try:
        parent = me.parent()
        if parent is None:
            return []
        ranks = [p for p in parent.children() if p.pid != me.pid]
        return ranks + [c for r in ranks for c in r.children(recursive=True)]
    except psutil.Error:
        return []


def _own_and_children_s() -> tuple[float, float, float]:
    """CPU seconds of this process, of its children (running or reaped) and of the job's other local ranks."""
    me = psutil.Process()
    t = me.cpu_times()
    children = t.children_user + t.children_system
    for child in me.children(recursive=True):  # workers still running: not in children_* until reaped
        children += _cpu_s(child)
    return t.user + t.system, children, sum(_cpu_s(p) for p in siblings(me))


def mark(worker_batches: int = 0, steps: int = 0) -> LoadMark | None:
    """The counters now, with the batches the loaders with workers have handed out and the steps seen; None where
    psutil cannot read them."""
    try:
        t = psutil.cpu_times()
        busy = t.user + t.system + getattr(t, "nice", 0.0) + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
        own, children, ranks = _own_and_children_s()
        return LoadMark(time.monotonic(), busy, own + children + ranks, children, worker_batches, compiled_so_far(), steps,
                        minor_faults(), process_wait_s(), steal_s())
    except (psutil.Error, OSError):
        return None


LOAD_WINDOW_S = 0.5
"""Seconds between two marks below which other processes' load is not told (the system's counters tick at 100 Hz)."""


def threads_wait_ms(start: LoadMark | None, end: LoadMark | None) -> float | None:
    """Milliseconds a step the process's threads waited for a core between two marks, summed over threads (None:
    unread, or no step between them)."""
    if start is None or end is None or start.threads_wait_s is None or end.threads_wait_s is None or \
            end.steps <= start.steps:
        return None
    return max(0.0, end.threads_wait_s - start.threads_wait_s) * 1e3 / (end.steps - start.steps)


def steal_share(start: LoadMark | None, end: LoadMark | None) -> float | None:
    """The VM's steal time between two marks, a share of all its CPUs' time (None: unread, or too short)."""
    if start is None or end is None or start.steal_s is None or end.steal_s is None or \
            end.at - start.at < LOAD_WINDOW_S:
        return None
    return max(0.0, end.steal_s - start.steal_s) / ((end.at - start.at) * (psutil.cpu_count() or 1))


def others_cores(start: LoadMark | None, end: LoadMark | None) -> float | None:
    """Cores other processes kept busy between two marks, on average; None if unknown or too short
    to tell (the system's counters tick at 100 Hz)."""
    if start is None or end is None or end.at - start.at < LOAD_WINDOW_S:
        return None
    others = (end.busy_s - start.busy_s) - (end.ours_s - start.ours_s)
    return max(0.0, others / (end.at - start.at))


WORKER_BATCHES = 8
"""Batches from loaders with workers below which their CPU per batch is not worked out (a worker's start would be
most of it)."""


def worker_cpu(start: LoadMark | None, end: LoadMark | None) -> WorkerCpu | None:
    """What the DataLoader's worker processes ran per batch between two marks (None: no such loader, too few
    batches, or the counters unread)."""
    if start is None or end is None or end.worker_batches - start.worker_batches < WORKER_BATCHES:
        return None
    batches = end.worker_batches - start.worker_batches
    return WorkerCpu(batches, max(0.0, end.children_s - start.children_s) * 1e3 / batches)


def compiled(start: LoadMark | None, end: LoadMark | None) -> Compiles | None:
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


def page_faults(start: LoadMark | None, end: LoadMark | None) -> float | None:
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
        self.opened = mark()
        """The counters as the watch opened, before the script's imports: other processes' load is told from here
        when the measured steps took under half a second (a run of 80 short steps is over in a tenth of one, and a
        load that stretched it went unseen)."""
        self.start: LoadMark | None = None
        self.end: LoadMark | None = None
        """The machine's CPU counters as the measured steps started and as the watch stopped."""
        self.early_faults: list[tuple[int, int | None]] = []
        """(steps seen, minor page faults) as the first step ended and as the last step before the profiler window
        ended: the warm-up's steady steps, before the window's memory and the detailed runs' can move where glibc's
        heap ends (a script whose allocator hands big blocks back every step faulted 36 000 pages a step unwatched
        and 1 400 to 14 000 under the doctor, 2026-11-26)."""

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
        short = start is not None and end is not None and end.at - start.at < LOAD_WINDOW_S
        load_from = self.opened if short else start
        return Machine(others_cores(load_from, end), worker_cpu(start, end), page_faults(start, end),
                       early_page_faults(self.early_faults), compiled(start, end), threads_wait_ms(start, end),
                       steal_share(load_from, end))
