"""The machine's load over a watched run, owned in one place: the CPU counters at the two ends of the measured steps,
the phases' waits for a core (a `WaitMeter` on the phase clock's edges), and whether the run's threads took turns on
one CPU (`CoreSharing`, which the stack sampler's thread reads at its rate).

`LoadTracker.part` joins them into the run's `Load`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Protocol

from trainspeed.load.core_sharing import CoreSharing
from trainspeed.load.marks import LOAD_WINDOW_S, LoadMark, mark, others_cores, steal_share, threads_wait_ms
from trainspeed.load.op_lengths import OpLengths
from trainspeed.load.result import Load, PhaseLoad, StepWaits
from trainspeed.load.wait_bounds import phase_wait
from trainspeed.load.waits import BUSY_WAIT, WaitMeter, process_wait_s, thread_wait


class Listened(Protocol):
    """A clock that tells a listener each stretch of host time it charges (`watch.phases.PhaseClock`)."""

    def listen(self, listener: WaitMeter | None) -> None: ...


StepReading = tuple[Mapping[str, float], StepWaits]
"""One detailed step's seconds per phase, and what those phases waited for a core."""


class LoadTracker:
    """The run's load: other processes' CPU, the process's threads' wait for a core, the phases' share of it."""

    def __init__(self, phases: tuple[str, ...]) -> None:
        self.phases = phases
        self.opened = mark()
        """The counters as the watch opened, before the script's imports: other processes' load is told from here
        when the measured steps took under half a second (a run of a few dozen short steps is over in a tenth of one,
        and a load that stretched it went unseen)."""
        self.start: LoadMark | None = None
        self.end: LoadMark | None = None
        """The counters as the measured steps started and as the watch stopped."""
        self.meter: WaitMeter | None = None
        """The phases' waits for a core, read at the clock's edges on detailed steps (None where Linux does not
        count them)."""
        self.cores = CoreSharing()
        """Whether the training thread and torch's intra-op threads took turns on one CPU (read by the sampler)."""
        self._warm_from: tuple[float, float | None] | None = None
        """(when, the process's threads' wait so far) as the watch started: the warm-up's wait (`measuring`)."""

    def watch(self, clock: Listened) -> None:
        """Read the calling thread's run-queue wait (the training thread's) at the clock's edges, from now on."""
        reader = thread_wait()
        if reader is None:
            return
        self.meter = WaitMeter(reader, self.phases)
        clock.listen(self.meter)
        self._warm_from = (time.monotonic(), process_wait_s())

    def measuring(self, steps: int) -> None:
        """The measured steps start now (`steps` seen so far): the counters' first mark. Where the process's threads
        waited for a core during the warm-up (BUSY_WAIT of its time or more), the phases' waits count its native
        threads' too (torch's intra-op threads): a read per thread at each edge of a detailed step, dear on a quiet
        machine's small steps, where nothing waits."""
        self.start = mark(steps)
        self.cores.reset()
        if self.meter is None or self._warm_from is None:
            return
        t0, w0 = self._warm_from
        start = self.start
        w1, elapsed = (start.threads_wait_s, start.at - t0) if start is not None else (None, 0.0)
        if w0 is not None and w1 is not None and elapsed > 0 and (w1 - w0) / elapsed >= BUSY_WAIT:
            self.meter.reader.add_native()
        self._warm_from = None

    def threads_waited(self) -> bool:
        """Whether the process's threads have waited for a core BUSY_WAIT of the time since the watch started or more
        (other processes on the cores), or that is not known: the profiler window's op counter then reads their waits
        around each op, to time each op less its wait (`watch.op_counter`). On a quiet machine nothing waits, and the
        reads cost more than the op counter's other work: about 14 us an op for three threads' counters, which on an
        LBFGS script's profiled step of 38,752 ops was half a second of the user's run (BENCHMARKS.md, "The whole
        process")."""
        if self._warm_from is None:
            return True
        t0, w0 = self._warm_from
        w1, elapsed = process_wait_s(), time.monotonic() - t0
        return w0 is None or w1 is None or elapsed <= 0 or (w1 - w0) / elapsed >= BUSY_WAIT

    def ops_known(self, lengths: dict[str, OpLengths]) -> None:
        """How long each phase's ops run (the profiler window's), for joining the waits of each reading."""
        if self.meter is not None:
            self.meter.ops_known(lengths)

    def stopped(self, steps: int) -> None:
        """The watch stops (`steps` seen): the counters' last mark."""
        if self.start is not None:
            self.end = mark(steps)

    def close(self) -> None:
        if self.meter is not None:
            self.meter.close()
        self.cores.close()

    def last_step(self, detailed: bool) -> StepWaits | None:
        """The waits of the step that closed just now, where it was detailed (None: not read)."""
        return self.meter.last if detailed and self.meter is not None else None

    def part(self, readings: Sequence[StepReading], shares: Mapping[str, float], step_ms: float | None) -> Load | None:
        """The run's load: the counters' figures, and each phase's wait from the detailed steps' `readings` applied to
        its share of the mean step (`step_ms`); None where nothing of it was read."""
        start, end = self.start, self.end
        short = start is not None and end is not None and end.at - start.at < LOAD_WINDOW_S
        load_from = self.opened if short else start
        load = Load(others_cpu_cores=others_cores(load_from, end), threads_wait_ms_per_step=threads_wait_ms(start, end),
                    steal_share=steal_share(load_from, end), threads_one_cpu_share=self.cores.share(),
                    phases=self._phases(readings, shares, step_ms))
        return None if load == Load() else load

    def _phases(self, readings: Sequence[StepReading], shares: Mapping[str, float],
                step_ms: float | None) -> dict[str, PhaseLoad]:
        """Each phase's (wait for a core per step, the part of its time it lost to waiting, that part in the median
        step): the part from its detailed steps' bounds (`wait_bounds`: the threads' waits summed, and each reading's
        longest and joint), applied to the phase's share of the mean step (the detailed steps are a sample, and a
        slice lost now and then falls on few of them); none where no wait was read."""
        if not readings or not step_ms:
            return {}
        out = {}
        for p in self.phases:
            found = phase_wait([(phases[p], waits.summed[p], waits.longest[p], waits.joint[p])
                                for phases, waits in readings])
            part, typical = (found.part, found.typical) if found is not None else (0.0, 0.0)
            out[p] = PhaseLoad(part * shares[p] * step_ms, part, typical)
        return out
