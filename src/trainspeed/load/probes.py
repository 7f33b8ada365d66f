"""What a probe after the run asks of the load: how long its threads waited for a core while it timed its work, and
its time on free cores.

A probe times some work in readings (a batch of tiny ops, a few matrix products, a DataLoader's batches). Beside busy
processes any reading may hold a wait for a core, which is the machine's, not the work's. `probe_waits` gives the
reader of those waits (`ProbeWaits`); `on_free_cores` keeps the readings taken on free cores, else each reading
without its waits (`wait_bounds`); `less_wait` takes a reading's share of its threads' summed wait off it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from trainspeed.load.wait_bounds import without_waits
from trainspeed.load.waits import ThreadWait, thread_wait, threads_wait

FREE_CORE = 0.05
"""A reading whose threads waited for a core this share of its time or less was taken on free cores."""


class ProbeWaits:
    """Seconds the probe's threads waited for a core since the last call (calling it), and the longest one thread's
    wait in that reading (`longest`). Wraps Linux's counts (`waits.ThreadWait`), a test's stand-in (a callable,
    perhaps with a `longest` of its own), or nothing (no wait, where the system does not count it)."""

    def __init__(self, waited: Callable[[], float] | None) -> None:
        self._waited = waited

    def __call__(self) -> float:
        return self._waited() if self._waited is not None else 0.0

    def longest(self, summed: float, threads: int) -> float:
        """The longest one thread's wait in the reading the last call gave; from a reader that does not say (a
        test's stand-in), the summed wait shared evenly among the `threads` (the least the longest can be)."""
        longest = getattr(self._waited, "longest", None)
        return float(longest) if longest is not None else summed / max(1, threads)

    def add_process(self, pid: int) -> bool:
        """Also count another process's main thread (a DataLoader worker's); False where Linux's counts are not the
        reader (a test's stand-in, or none) or the process could not be read."""
        return isinstance(self._waited, ThreadWait) and self._waited.add_process(pid)


@contextlib.contextmanager
def probe_waits(waited: Callable[[], float] | None = None, native: bool = True) -> Iterator[ProbeWaits]:
    """What a probe reads its wait for a core with: `waited` where given (a test's), else a reader of this thread's
    (and with `native` torch's intra-op threads') run-queue wait, closed at the end; where the system does not count
    it, no wait."""
    if waited is not None:
        yield ProbeWaits(waited)
        return
    reader = threads_wait() if native else thread_wait()
    try:
        yield ProbeWaits(reader)
    finally:
        if reader is not None:
            reader.close()


def less_wait(wall: float, waited: float, threads: int = 1) -> float:
    """A reading's time on free cores: its wall time less its threads' share of their summed wait for a core (each
    one's share, on average, delayed the work), the wait at most the wall time."""
    return wall - min(waited, wall) / max(1, threads)


def on_free_cores(readings: list[tuple[float, float, float]]) -> list[float]:
    """The times of the (wall, summed wait, longest one thread's wait) readings of the same work taken on free cores
    (waits of FREE_CORE of their time or less); where none was, each reading without its waits (`wait_bounds`: the
    one time nearest every reading's range, between its wall less the summed wait and its wall less the longest).
    Each reading less its threads' share of the summed wait took them as waiting evenly: a thread that waited while
    the other spun at the op's barrier waited alone, and the reading kept half of that stall."""
    free = [wall for wall, waited, _ in readings if waited <= FREE_CORE * wall]
    # a reading that waited all its time tells nothing of the work: none left, their wall times (the most it took)
    return free or [t for t in without_waits(readings) if t > 0.0] or [wall for wall, *_ in readings]
