"""The machine's load during a watched run, as the result holds it (`WatchResult.load`): what other processes kept
busy, what the run's threads lost waiting for a core, by phase, and whether they took turns on one CPU."""

from __future__ import annotations

from dataclasses import dataclass, field

OTHERS_BUSY = 0.5
"""Cores other processes must keep busy, on average, before the doctor calls the machine shared: a quiet machine's
daemons use a few hundredths of one, and one busy process beside two intra-op threads reads well above this (the
threads' spinning takes the rest; BENCHMARKS.md, "A busy machine")."""


@dataclass(slots=True)
class StepWaits:
    """What one detailed step's phases waited for a core, each phase's readings summed (seconds)."""

    summed: dict[str, float]
    """The training thread's and torch's intra-op threads' waits, added up."""
    longest: dict[str, float]
    """Each reading's longest one thread's wait: with `summed`, the bounds of what the phase lost (`wait_bounds`)."""
    joint: dict[str, float]
    """Each reading's time that at least one thread waited, had they waited independently of each other, moved
    towards the longest by its phase's ops' length (`waits.ThreadWait.joint`): the point between the bounds."""


@dataclass(frozen=True)
class PhaseLoad:
    """One phase's wait for a core."""

    wait_ms: float | None = None
    """Milliseconds a step the phase lost waiting for a core: `wait_share` of its share of the mean step (None where
    the system does not count it)."""
    wait_share: float | None = None
    """The part of the phase's time its detailed steps lost waiting for a core."""
    median_wait_share: float | None = None
    """The same part in the median step that ran the phase (0 where the waits come in bursts: a slice lost now and
    then)."""


@dataclass(frozen=True)
class Load:
    """The load part of a watched run (`WatchResult.load`; None where nothing of it was read)."""

    others_cpu_cores: float | None = None
    """Cores other processes of this machine kept busy while the steps were measured, on average (psutil; `marks`);
    where the measured steps took under half a second, from the watch's start (the script's imports and warm-up too);
    None when not known or the script itself ran under half a second."""
    threads_wait_ms_per_step: float | None = None
    """Milliseconds a step every thread of the process waited for a core, summed over threads (`waits`)."""
    steal_share: float | None = None
    """The VM's steal time over the measured steps, a share of its CPUs' time (None: not said here)."""
    threads_one_cpu_share: float | None = None
    """Of the sampler's samples in the measured steps with two or more of the training thread and torch's intra-op
    threads runnable, the share with two of them on one CPU: taking turns on one core (`core_sharing`; None: fewer
    than 20 such samples, or not read here)."""
    phases: dict[str, PhaseLoad] = field(default_factory=dict)
    """Each phase's wait for a core (empty where no wait was read)."""

    @property
    def busy(self) -> bool:
        """Whether other processes kept OTHERS_BUSY cores busy over the run (the machine was shared)."""
        return (self.others_cpu_cores or 0.0) >= OTHERS_BUSY

    def phase(self, name: str) -> PhaseLoad:
        """`name`'s wait (all None where it was not read)."""
        return self.phases.get(name) or _UNREAD


_UNREAD = PhaseLoad()
