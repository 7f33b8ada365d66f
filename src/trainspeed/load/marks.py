"""How much of the machine's CPU other processes used while the run was measured, and how long the process's threads
waited for a core: cumulative counters read at the two ends of the measured steps.

A process that is not the watched one (another training run, a browser, a compile) takes cores that torch's intra-op
threads count on. An intra-op parallel region waits for its slowest thread, and a thread that lost its core to another
process waits a scheduler slice (BENCHMARKS.md, "Where the code's constants come from").

Read from cumulative counters at the two ends (psutil: the system's CPU times, this process's and its children's), so a
run of a second is measured as well as one of an hour. "Ours" takes in the DataLoader's worker processes (children) and
the intra-op threads that spin while they wait, and the job's other ranks on this node under torchrun or any launcher
that sets the env:// rendezvous's variables (and their children): a rank is the job, not another process beside it.
A hypervisor's steal time is not another process of this machine, and not counted."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from trainspeed.load.waits import process_wait_s


@dataclass(frozen=True)
class LoadMark:
    at: float
    """time.monotonic() seconds."""
    busy_s: float
    """CPU seconds the whole machine has run (every CPU, without idle, iowait and steal)."""
    ours_s: float
    """CPU seconds this process and its children have run, reaped children included (and the job's other local
    ranks, under torchrun)."""
    steps: int = 0
    """Training steps seen so far."""
    threads_wait_s: float | None = None
    """Run-queue wait so far of the process's threads, summed (`waits.process_wait_s`; None: unread)."""
    steal_s: float | None = None
    """The VM's steal time so far, all CPUs together (None: not said here)."""


def _cpu_s(process: psutil.Process) -> float:
    try:
        c = process.cpu_times()
    except psutil.Error:  # it ended between the listing and the read
        return 0.0
    return c.user + c.system


RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE")
"""The environment every rank of a job started for `init_process_group`'s env:// rendezvous shares (torchrun, a
cluster's launcher, or a hand-written one set it); a process on this host that names the same is one of its ranks."""


def siblings(me: psutil.Process) -> list[psutil.Process]:
    """The job's other ranks on this host and their children. Under torchrun: the launcher's other workers. Under
    another launcher (one that sets the rendezvous's variables itself): the processes whose environment names this
    one's rendezvous (`RENDEZVOUS`; a process whose environment cannot be read is not taken)."""
    try:
        if "TORCHELASTIC_RUN_ID" in os.environ:
            if int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1) < 2:
                return []
            parent = me.parent()
            ranks = [p for p in parent.children() if p.pid != me.pid] if parent is not None else []
        else:
            ranks = _same_rendezvous(me)
        return ranks + [c for r in ranks for c in r.children(recursive=True)]
    except psutil.Error:
        return []


def _same_rendezvous(me: psutil.Process) -> list[psutil.Process]:
    ours = [os.environ.get(key) for key in RENDEZVOUS]
    if None in ours or int(ours[2] or 1) < 2:
        return []
    found = []
    for p in psutil.process_iter(["environ"]):
        env = p.info.get("environ") or {}
        if p.pid != me.pid and [env.get(key) for key in RENDEZVOUS] == ours and "RANK" in env:
            found.append(p)
    return found


def own_and_children_s() -> tuple[float, float, float]:
    """CPU seconds of this process, of its children (running or reaped) and of the job's other local ranks."""
    me = psutil.Process()
    t = me.cpu_times()
    children = t.children_user + t.children_system
    for child in me.children(recursive=True):  # workers still running: not in children_* until reaped
        children += _cpu_s(child)
    return t.user + t.system, children, sum(_cpu_s(p) for p in siblings(me))


def mark(steps: int = 0) -> LoadMark | None:
    """The counters now, with the steps seen; None where psutil cannot read them."""
    try:
        t = psutil.cpu_times()
        busy = t.user + t.system + getattr(t, "nice", 0.0) + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
        own, children, ranks = own_and_children_s()
        return LoadMark(time.monotonic(), busy, own + children + ranks, steps, process_wait_s(), steal_s())
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


def steal_s() -> float | None:
    """CPU seconds the hypervisor gave other guests while this machine's CPUs wanted to run, all CPUs together, so
    far; None where the system does not say (not Linux)."""
    try:
        return float(psutil.cpu_times().steal)
    except (AttributeError, psutil.Error, OSError):
        return None
