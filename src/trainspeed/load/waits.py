"""The run's threads' waits for a core: read from Linux's counters (`ThreadWait`) and charged to the phase that ran
(`WaitMeter`).

Time waiting for a core is a thread that could run but found every CPU taken by another. Linux counts it for each
thread: `/proc/<pid>/task/<tid>/schedstat` holds the thread's time on a CPU, its time waiting on a run queue, and its
time slices, in nanoseconds (what `perf sched` and pressure stall information read). On a machine shared with other busy
processes a step's wall time holds that wait, and it falls on whichever phase was running (BENCHMARKS.md, "Where the
code's constants come from").

The phase clock tells the meter each stretch of host time as it charges it to a phase (`PhaseClock.listen`); the meter
reads the threads' wait since the last edge and charges it to the same phase, at most the stretch, joined by how long
the phase's ops run (`op_lengths`): short ops lose the time at least one thread waited, long ones about the longest one
thread's wait. It listens on detailed steps only (the clock tells it nothing on the others), and each detailed step's
waits are `last` once the step closes."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from trainspeed.load.op_lengths import OpLengths
from trainspeed.load.result import StepWaits

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


def long_op_share(lengths: OpLengths, wait: float) -> float:
    """How far from the joint wait towards the longest one thread's wait a reading's loss lies, given its phase's
    ops and the mean length of one wait for a core in it (seconds): each op's share of the phase's time times
    L / (L + wait), summed. 0 where the ops are unknown or nothing waited."""
    if wait <= 0.0:
        return 0.0
    return min(1.0, sum(share * length / (length + wait) for share, length in lengths if length > 0.0))


def joined(joint: float, longest: float, lengths: OpLengths, wait: float) -> float:
    """What a reading lost: its joint wait moved towards its longest one thread's wait by `long_op_share`."""
    return joint - long_op_share(lengths, wait) * max(0.0, joint - longest)


SERIAL_PHASES = ("data", "checkpoint")
"""Phases the training thread runs alone, charged only that thread's own wait for a core: a save serialises tensors
and writes a file on it; a data wait is that thread blocked on a DataLoader's queue, or making the batch itself (a
Dataset's `__getitem__`, the collate; where a transform there runs a parallel torch op, its threads' waits go
uncounted and the phase keeps them). torch's intra-op threads spin for a while after a parallel op (libgomp's spin
count) and may wait for a core meanwhile, which delays nothing (BENCHMARKS.md, "Where the code's constants come
from")."""


class WaitMeter:
    """The wait for a core of the phases of the detailed step running now, read at each of its edges."""

    def __init__(self, reader: ThreadWait, phases: tuple[str, ...]) -> None:
        self.reader = reader
        self._zero = dict.fromkeys(phases, 0.0)
        self.summed = self._zero.copy()
        self.longest = self._zero.copy()
        self.joint = self._zero.copy()
        self.op_lengths: dict[str, OpLengths] = {}
        """Each phase's ops and how long they run (`op_lengths`, from the profiler window): how the readings' waits
        in it are joined (`ThreadWait.joint`)."""
        self.last: StepWaits | None = None
        """The waits of the detailed step closed last (None before one)."""

    def charged(self, phase: str, seconds: float) -> None:
        """`seconds` of host time went to `phase` just now: the wait since the last edge is its, up to that."""
        reader = self.reader
        waited = min(reader(), seconds)
        if not waited:  # alone, nearly every reading: nothing lost (the longest and joint waits are at most this)
            return
        if phase in SERIAL_PHASES:  # the training thread's wait alone, every bound the same
            waited = min(reader.own, waited)
            longest = joint = waited
        else:
            longest = min(reader.longest, waited)
            joint = min(reader.joint(seconds, self.op_lengths.get(phase, ())), waited)
        self.summed[phase] += waited
        self.longest[phase] += longest
        self.joint[phase] += joint

    def skipped(self) -> None:
        """The time since the last edge was nobody's (the watcher's own work): its wait is no phase's."""
        self.reader()

    def forget(self) -> None:
        """The wait so far is no phase's: the step's waits count from now."""
        self.reader()
        zero = self._zero
        self.summed.update(zero)
        self.longest.update(zero)
        self.joint.update(zero)

    def closed(self) -> None:
        """The step closed (its last stretch charged): its waits are `last`; the next step's start from nothing."""
        self.last = StepWaits(self.summed, self.longest, self.joint)
        zero = self._zero
        self.summed, self.longest, self.joint = zero.copy(), zero.copy(), zero.copy()

    def ops_known(self, lengths: dict[str, OpLengths]) -> None:
        """How long each phase's ops run (the profiler window's): how each reading's waits are joined from now on."""
        self.op_lengths = lengths

    def close(self) -> None:
        self.reader.close()
