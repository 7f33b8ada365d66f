"""Time waiting for a core: a thread that could run but found every CPU taken by another.

Linux counts it for each thread: `/proc/<pid>/task/<tid>/schedstat` holds the thread's time on a CPU, its time
waiting on a run queue, and its time slices, in nanoseconds (what `perf sched` and pressure stall information read).
On a machine shared with other busy processes a step's wall time holds that wait, and it falls on whichever phase
was running: beside two busy processes on the 2-vCPU VM, a step that saves a checkpoint took 342 ms instead of 107,
its training thread waiting 152 ms of it (forward 32, backward 34, optimizer 46, the save 40), 2026-11-28.

A VM's steal time (`/proc/stat`, through psutil) is the same loss one level down: the hypervisor ran another
guest on this one's CPU. It is the machine's, not a thread's.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence

import psutil

from trainspeed.watch.op_lengths import OpLengths, joined
from trainspeed.watch.wait_bounds import without_waits

SCHEDSTAT = "/proc/thread-self/schedstat"
BUSY_WAIT = 0.05
"""The process's threads' summed wait for a core, a share of the wall time, from which the machine is busy enough
for the phases' waits to count torch's intra-op threads too (`ThreadWait.add_native`)."""


class ThreadWait:
    """The run-queue wait since the last call, in seconds (calling it), of the opening thread and of the threads
    `add_native` added, summed, and the longest one thread's (`longest`): an intra-op parallel op waits for each of
    its threads that lost its core, in turn or at the same time, so the interval lost between the two (the phases'
    estimate: `wait_bounds`). One positioned read per thread of a file kept open, a microsecond or two each. Open it
    in the thread to watch (`/proc/thread-self` is the opener's)."""

    def __init__(self, fd: int) -> None:
        self.fds: list[int] = []
        self.last: list[int] = []
        self.slices: list[int] = []
        """Each thread's time slices on a CPU so far (schedstat's third field): it waited before each, if at all."""
        self.follow(fd)
        self.longest = 0.0
        """The longest one thread's wait in the last call's (seconds): what the interval lost at least, where the
        threads waited at the same time (`wait_bounds`)."""
        self.each: Sequence[int] = ()
        """The waits of the threads that waited in the last call's, nanoseconds (`joint`; only where two or more
        did: one thread's wait is its own joint wait)."""
        self.own = 0.0
        """The opening thread's own wait in the last call's (seconds): all that a phase that thread runs alone lost
        (a save: torch's intra-op threads, spinning after the last parallel op, wait then and delay nothing)."""
        self.one_wait = 0.0
        """The mean length of one wait for a core in the last call's (seconds): the threads' summed wait over the
        time slices they ran after it (a slice that came without a wait, a thread woken onto a free core, makes it
        shorter, and the reading nearer its joint wait: `joint`)."""

    def follow(self, fd: int) -> None:
        """Also count the thread whose schedstat `fd` reads (open), from now on."""
        wait, slices = _read(fd) or (0, 0)
        self.fds.append(fd)
        self.last.append(wait)
        self.slices.append(slices)

    def __call__(self) -> float:
        total = longest = own = sliced = 0
        last, last_slices = self.last, self.slices
        each: list[int] | None = None
        for i, fd in enumerate(self.fds):
            now = _read(fd)
            if now is None:  # a thread that ended (torch.set_num_threads)
                continue
            waited = now[0] - last[i]
            if not i:
                own = waited
            if waited:
                if total:  # a second thread that waited: the joint wait needs each one's (the first's is the total)
                    if each is None:
                        each = [total]
                    each.append(waited)
                total += waited
                longest = max(longest, waited)
                sliced += now[1] - last_slices[i]
            last[i], last_slices[i] = now
        self.each = each or ()  # no list where at most one thread waited (every detailed step's edge reads this)
        self.longest = longest * 1e-9
        self.own = own * 1e-9
        self.one_wait = total / sliced * 1e-9 if sliced > 0 else total * 1e-9
        return total * 1e-9

    def joint(self, seconds: float, lengths: OpLengths = ()) -> float:
        """What an interval of `seconds` that the last call read lost. Where its ops are short against a wait for a
        core (or unknown), the time at least one of its threads waited, had they waited independently of each
        other: `seconds` times one less the product of each one's share of the interval on a core (`wait_bounds`);
        where they are long (`lengths`: its phase's ops, `op_lengths`), towards the longest one thread's wait, by
        `op_lengths.long_op_share`. Where one thread waited at most, its wait."""
        longest = min(self.longest, seconds)
        if not self.each:
            return longest
        joint = joint_wait([ns * 1e-9 for ns in self.each], seconds)
        return joined(joint, longest, lengths, self.one_wait) if lengths else joint

    def add_native(self) -> int:
        """Also count the process's threads that Python did not start (torch's intra-op threads among them; a CUDA
        driver's, which sleep): an intra-op parallel op waits for each of its threads, so a worker's wait for a core
        is the training thread's too. Returns how many were added."""
        added = 0
        for tid in native_tids():
            fd = _open_task(tid)
            if fd is None:  # it ended between the listing and the open
                continue
            self.follow(fd)
            added += 1
        return added

    def add_process(self, pid: int) -> bool:
        """Also count another process's main thread (a DataLoader worker's: the batch it makes is the probe's
        wait). Returns whether it could be read."""
        try:
            fd = os.open(f"/proc/{pid}/schedstat", os.O_RDONLY)
        except OSError:
            return False
        self.follow(fd)
        return True

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []


def joint_wait(waits: list[float], seconds: float) -> float:
    """The part of an interval of `seconds` during which at least one of the threads waited for a core, each having
    waited `waits` (seconds) in it at moments independent of the others': `seconds` * (1 - prod(1 - w / seconds)).
    Between the longest one wait (they waited at once) and their sum (one after another)."""
    if seconds <= 0.0:
        return 0.0
    on_core = 1.0
    for waited in waits:
        on_core *= 1.0 - min(waited, seconds) / seconds
    return seconds * (1.0 - on_core)


def native_tids() -> list[int]:
    """This process's threads that Python did not start, the main thread aside: torch's intra-op threads among them
    (a CUDA driver's too, which sleep)."""
    python = {t.native_id for t in threading.enumerate()}
    return [tid for tid in map(int, _tids()) if tid not in python and tid != os.getpid()]


def _tids() -> list[str]:
    """This process's threads now (none where the system does not list them)."""
    try:
        return os.listdir("/proc/self/task")
    except OSError:
        return []


def _open_task(tid: int | str) -> int | None:
    try:
        return os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY)
    except OSError:
        return None


def _wait_ns(fd: int) -> int | None:
    read = _read(fd)
    return read[0] if read is not None else None


def _read(fd: int) -> tuple[int, int] | None:
    """(nanoseconds waited on a run queue, time slices run) so far, from a schedstat file; None where unreadable."""
    try:
        fields = os.pread(fd, 64, 0).split()
        return int(fields[1]), int(fields[2])
    except (OSError, ValueError, IndexError):
        return None


def thread_wait() -> ThreadWait | None:
    """A reader of the calling thread's run-queue wait; None where the system does not count it (not Linux, or a
    kernel without schedstats)."""
    try:
        fd = os.open(SCHEDSTAT, os.O_RDONLY)
    except OSError:
        return None
    if _wait_ns(fd) is None:
        os.close(fd)
        return None
    return ThreadWait(fd)


def threads_wait() -> ThreadWait | None:
    """A reader of the calling thread's and torch's intra-op threads' wait for a core (a probe's: its parallel ops
    wait for each of their threads); None where the system does not count it."""
    reader = thread_wait()
    if reader is not None:
        reader.add_native()
    return reader


@contextlib.contextmanager
def probe_waits(waited: Callable[[], float] | None = None, native: bool = True) -> Iterator[Callable[[], float]]:
    """What a probe reads its wait for a core with: `waited` where given (a test's), else a reader of this thread's
    (and with `native` torch's intra-op threads') run-queue wait, closed at the end; where the system does not count
    it, no wait."""
    if waited is not None:
        yield waited
        return
    reader = threads_wait() if native else thread_wait()
    try:
        yield reader or (lambda: 0.0)
    finally:
        if reader is not None:
            reader.close()


def less_wait(wall: float, waited: float, threads: int = 1) -> float:
    """A reading's time on free cores: its wall time less its threads' share of their summed wait for a core (each
    one's share, on average, delayed the work), the wait at most the wall time."""
    return wall - min(waited, wall) / max(1, threads)


def longest_of(wait: Callable[[], float], summed: float, threads: int) -> float:
    """The longest one thread's wait in the reading `wait` just gave (`ThreadWait.longest`); from a reader that does
    not say (a test's stand-in), the summed wait shared evenly among the `threads` (the least the longest can be)."""
    longest = getattr(wait, "longest", None)
    return float(longest) if longest is not None else summed / max(1, threads)


FREE_CORE = 0.05
"""A reading whose threads waited for a core this share of its time or less was taken on free cores."""


def on_free_cores(readings: list[tuple[float, float, float]]) -> list[float]:
    """The times of the (wall, summed wait, longest one thread's wait) readings of the same work taken on free cores
    (waits of FREE_CORE of their time or less); where none was, each reading without its waits (`wait_bounds`: the
    one time nearest every reading's range, between its wall less the summed wait and its wall less the longest).
    Each reading less its threads' share of the summed wait took them as waiting evenly: a thread that waited while
    the other spun at the op's barrier waited alone, and the reading kept half of that stall."""
    free = [wall for wall, waited, _ in readings if waited <= FREE_CORE * wall]
    # a reading that waited all its time tells nothing of the work: none left, their wall times (the most it took)
    return free or [t for t in without_waits(readings) if t > 0.0] or [wall for wall, *_ in readings]


def process_wait_s() -> float | None:
    """Run-queue wait so far of every thread this process has now (the training thread, torch's intra-op threads,
    the watcher's), in seconds; None where unread. Threads that ended took theirs with them."""
    tids = _tids()
    if not tids:
        return None
    total = 0
    for tid in tids:
        fd = _open_task(tid)
        if fd is None:  # it ended between the listing and the open
            continue
        total += _wait_ns(fd) or 0
        os.close(fd)
    return total * 1e-9


def steal_s() -> float | None:
    """CPU seconds the hypervisor gave other guests while this machine's CPUs wanted to run, all CPUs together, so
    far; None where the system does not say (not Linux)."""
    try:
        return float(psutil.cpu_times().steal)
    except (AttributeError, psutil.Error, OSError):
        return None
