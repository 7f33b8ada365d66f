"""What a phase lost to waiting for a core, from its detailed steps' bounds.

A step's phase ran `wall` seconds while the training thread and torch's intra-op threads waited `summed` seconds for a
core in all (each thread's run-queue wait added up: `waits.ThreadWait`), the longest of them `longest`. What the
phase lost lies between the two: at least the longest one thread's wait (the others waited at the same time), at most
the summed waits (they waited one after another: a parallel op waits for each of its threads in turn). So its time
without the waits lies in [wall - summed, wall - longest]. Which end holds depends on the ops and the load: a small op's
threads wait in turn, the sum's end (an MLP logging every step); a convolution's threads lose their cores at random, and
where the busy processes take most of the cores every thread waits most of the time, their waits overlapping. Schedstat
cannot tell which, step by step.

The point taken in each reading's range is `joint`: the time at least one thread waited had they waited at moments
independent of each other (`waits.joint_wait`: the interval times one less the product of each thread's share of it
on a core), read at every phase edge and summed over the step's readings of the phase. The phase does the same work each
step and the waits fall differently each time: its time without the waits is the median of those points, clipped into
each step's range (a range above it, a step that did more work, keeps its low end). Readings without a point (a test's,
a caller's own) take the one time nearest all of the ranges instead: the median of their ends (the distance from t to
[lo, hi] is (|t - lo| + |t - hi| - (hi - lo)) / 2). Where every thread waited most of a phase's time the ranges' low
ends are all 0, and the median of the ends takes the phase to nothing: the joint point keeps it (BENCHMARKS.md, "Where
the code's constants come from")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trainspeed.stats import median


@dataclass(frozen=True)
class PhaseWait:
    """One phase's wait for a core over the detailed steps that read it."""

    part: float
    """The part of the phase's time (over those steps) it lost to waiting for a core."""
    typical: float
    """The same part in the median step that ran the phase (0 where the waits come in bursts)."""


Reading = tuple[float, float, float] | tuple[float, float, float, float | None]
"""(wall, summed waits, longest one thread's wait[, joint wait]) in seconds: one step's phase, or a probe's run."""


def _range(wall: float, summed: float, longest: float) -> tuple[float, float]:
    """A step's phase time without its waits: at least `wall - summed`, at most `wall - longest` (both in [0, wall])."""
    return wall - min(summed, wall), wall - min(longest, summed, wall)


def without_waits(readings: Sequence[Reading]) -> list[float]:
    """Each of the readings of the same work without its waits: the median of their joint points (each reading's
    wall less its joint wait, in its range) where every reading has one, else the one time nearest all of their
    ranges (the median of their ends, see the module), each clipped into its own range; a range above it (a reading
    that did more work) keeps its low end."""
    ranges = [_range(*r[:3]) for r in readings]
    joints = [r[3] if len(r) > 3 else None for r in readings]
    if joints and all(j is not None for j in joints):
        net = median([min(max(r[0] - j, lo), hi)  # type: ignore[operator]
                      for r, j, (lo, hi) in zip(readings, joints, ranges, strict=True)]) or 0.0
    else:
        net = median([end for r in ranges for end in r]) or 0.0
    return [min(max(net, lo), hi) for lo, hi in ranges]


def phase_wait(steps: Sequence[Reading]) -> PhaseWait | None:
    """From each step's (wall, summed waits, longest one thread's wait[, joint wait]) in seconds for one phase: what
    the phase lost (`without_waits` over the steps that ran it); None where no step ran it."""
    ran = [s for s in steps if s[0] > 0.0]
    if not ran:
        return None
    kept = without_waits(ran)
    wall = sum(s[0] for s in ran)
    part = max(0.0, 1.0 - sum(kept) / wall)
    typical = median([1.0 - k / s[0] for k, s in zip(kept, ran, strict=True)]) or 0.0
    return PhaseWait(part, max(0.0, typical))
