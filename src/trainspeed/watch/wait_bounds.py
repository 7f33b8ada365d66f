"""What a phase lost to waiting for a core, from its detailed steps' bounds.

A step's phase ran `wall` seconds while the training thread and torch's intra-op threads waited `summed` seconds for
a core in all (each thread's run-queue wait added up: `run_queue.ThreadWait`), the longest of them `longest`. What
the phase lost lies between the two: at least the longest one thread's wait (the others waited at the same time),
at most the summed waits (they waited one after another: a parallel op waits for each of its threads in turn). So
its time without the waits lies in [wall - summed, wall - longest]. Which end holds depends on the ops: a small op's
threads wait in turn, the sum's end (an MLP logging every step); a convolution's threads lose their cores at
random, near the other end. Schedstat cannot tell which, step by step.

The phase does the same work each step, and the waits fall differently each time: the one time nearest all of the
steps' ranges (the least summed distance to them) is its time without the waits. That time is the median of all the
ranges' ends together: the distance from t to a range [lo, hi] is (|t - lo| + |t - hi| - (hi - lo)) / 2.
Beside two busy processes on the 2-vCPU VM (`benchmarks/wait_estimates.py`, 2026-11-28) it came near the phases
alone where the summed waits took a convolution's forward and backward to nearly nothing: the image classifier's
data, forward and backward 8.80, 6.29 and 5.16 ms a step against 10.89, 8.90 and 6.03 alone (less the summed
waits: 6.64, 0.85 and 1.41), and kept the sum's figures on an MLP's small ops (BENCHMARKS, "A busy machine").
"""

from __future__ import annotations

from dataclasses import dataclass

from trainspeed.stats import median


@dataclass(frozen=True)
class PhaseWait:
    """One phase's wait for a core over the detailed steps that read it."""

    part: float
    """The part of the phase's time (over those steps) it lost to waiting for a core."""
    typical: float
    """The same part in the median step that ran the phase (0 where the waits come in bursts)."""


def _range(wall: float, summed: float, longest: float) -> tuple[float, float]:
    """A step's phase time without its waits: at least `wall - summed`, at most `wall - longest` (both in [0, wall])."""
    return wall - min(summed, wall), wall - min(longest, summed, wall)


def without_waits(readings: list[tuple[float, float, float]]) -> list[float]:
    """Each of the readings of the same work, (wall, summed waits, longest one thread's wait) in seconds, without its
    waits: the one time nearest all of their ranges (the median of their ends, see the module), where its own range
    allows; a range above it (a reading that did more work) keeps its low end."""
    ranges = [_range(*s) for s in readings]
    net = median([end for r in ranges for end in r]) or 0.0
    return [min(max(net, lo), hi) for lo, hi in ranges]


def phase_wait(steps: list[tuple[float, float, float]]) -> PhaseWait | None:
    """From each step's (wall, summed waits, longest one thread's wait) in seconds for one phase: what the phase lost
    (`without_waits` over the steps that ran it); None where no step ran it."""
    ran = [s for s in steps if s[0] > 0.0]
    if not ran:
        return None
    kept = without_waits(ran)
    wall = sum(s[0] for s in ran)
    part = max(0.0, 1.0 - sum(kept) / wall)
    typical = median([1.0 - k / s[0] for k, s in zip(kept, ran, strict=True)]) or 0.0
    return PhaseWait(part, max(0.0, typical))
