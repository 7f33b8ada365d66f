"""Whether the training thread and torch's intra-op threads took turns on one CPU: sampled from each thread's state and
the CPU it last ran on (`/proc/self/task/<tid>/stat`, fields 3 and 39).

Beside busy processes the scheduler shares the cores between groups before threads: each session a group where autogroup
is on and the processes sit in the root CPU cgroup, else each CPU cgroup (a container, a systemd unit). Where the busy
processes share the run's group (started in one container, one session with autogroup off), each thread gets an equal
share, and the run's two intra-op threads may sit on one CPU's run queue, taking turns (BENCHMARKS.md, "Where the code's
constants come from"). On one core a thread that finished its part of a parallel op spins at the op's end (libgomp's
spin count) on the core the other needs: time on a core, not a wait for one, that the phases less their waits keep
(`load.view`), so the verdicts about the script judged on them may hold it.

A sample counts where two or more of the threads were runnable (state R: running, or waiting on a run queue): the share
of those with two of them on one CPU is `Load.threads_one_cpu_share`. One positioned read per thread of a file kept
open, at the sampler's rate (50 Hz)."""

from __future__ import annotations

import os
import threading

from trainspeed.load.waits import native_tids

MIN_SAMPLES = 20
"""Samples with two threads runnable below which no share is given (under half a second of them at 50 Hz)."""

MAX_THREADS = 64
"""Threads read per sample at most: the training thread and torch's intra-op threads first come first."""


class CoreSharing:
    """Counts, over the samples taken (`sample`), how often two of the training thread's and the process's native
    threads (torch's intra-op threads among them) were runnable, and how often two of those were on one CPU."""

    def __init__(self) -> None:
        self.fds: dict[int, int] = {}
        """Thread id -> an open file of its /proc stat."""
        self.runnable = 0
        """Samples with two or more of the threads runnable."""
        self.one_cpu = 0
        """Of those, samples with two runnable threads on one CPU."""
        self._follow(threading.main_thread().native_id)

    def follow_threads(self) -> None:
        """Also read the process's native threads started since (Python's own threads aside, the main one kept): an
        intra-op pool starts at the first parallel op; ended threads are dropped as their reads fail."""
        for tid in native_tids():
            if tid not in self.fds and len(self.fds) < MAX_THREADS:
                self._follow(tid)

    def _follow(self, tid: int | None) -> None:
        if tid is None:
            return
        try:
            self.fds[tid] = os.open(f"/proc/self/task/{tid}/stat", os.O_RDONLY)
        except OSError:
            pass

    def sample(self) -> None:
        """Read each thread's state and CPU once."""
        cpus: list[int] = []
        ended: list[int] = []
        for tid, fd in self.fds.items():
            read = _state_cpu(fd)
            if read is None:
                ended.append(tid)
            elif read[0] == "R":
                cpus.append(read[1])
        for tid in ended:
            os.close(self.fds.pop(tid))
        if len(cpus) >= 2:
            self.runnable += 1
            if len(set(cpus)) < len(cpus):
                self.one_cpu += 1

    def reset(self) -> None:
        """Count from now on (the measured steps start)."""
        self.runnable = self.one_cpu = 0

    def share(self) -> float | None:
        """Of the samples with two or more threads runnable, the share with two of them on one CPU (None: fewer
        than MIN_SAMPLES such samples)."""
        return self.one_cpu / self.runnable if self.runnable >= MIN_SAMPLES else None

    def close(self) -> None:
        for fd in self.fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = {}


def _state_cpu(fd: int) -> tuple[str, int] | None:
    """(state, the CPU it last ran on) from a thread's /proc stat; None where unreadable (the thread ended)."""
    try:
        text = os.pread(fd, 1024, 0)
        fields = text[text.rindex(b")") + 2:].split()
        return fields[0].decode(), int(fields[36])
    except (OSError, ValueError, IndexError):
        return None
