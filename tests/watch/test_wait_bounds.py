"""What a phase lost to waiting for a core, from its steps' bounds (`watch/wait_bounds.py`)."""

from __future__ import annotations

import pytest

from trainspeed.watch.wait_bounds import phase_wait


def test_threads_that_waited_in_turn_lost_their_summed_wait() -> None:
    """Small parallel ops: a thread waits a slice while the other spins at its barrier, then the other way round.
    The work is 1 ms every step; the steps that waited lost all of their two threads' waits (the range's low end),
    and the steps that did not wait pin the work at 1 ms, so the phase's time without the waits is 1 ms."""
    quiet = [(0.001, 0.0, 0.0)] * 4
    stalled = [(0.007, 0.006, 0.003)] * 3  # 3 ms each thread, one after the other
    found = phase_wait(quiet + stalled)
    assert found is not None
    assert found.part == pytest.approx(1 - 7 * 0.001 / (4 * 0.001 + 3 * 0.007))
    assert found.typical == 0.0  # the median step did not wait


def test_threads_that_waited_at_once_lost_about_the_longest_wait() -> None:
    """A convolution's long ops: each step's two threads lose their cores at random, some steps one after the other,
    some at the same time. The work is 10 ms; the summed waits alone would take most of it away."""
    steps = [
        (0.020, 0.010, 0.010),  # both waited the same 10 ms: [10, 10]
        (0.016, 0.012, 0.006),  # [4, 10]
        (0.018, 0.014, 0.008),  # [4, 10]
        (0.014, 0.008, 0.004),  # [6, 10]
        (0.025, 0.015, 0.015),  # [10, 10]
    ]
    found = phase_wait(steps)
    assert found is not None
    wall = sum(s[0] for s in steps)
    assert found.part == pytest.approx(1 - 5 * 0.010 / wall)
    summed = 1 - sum(s[0] - s[1] for s in steps) / wall  # what the summed waits alone said it lost
    assert found.part < summed


def test_a_step_that_did_more_work_keeps_it() -> None:
    """A step whose range lies above the phase's time without its waits (a checkpoint larger than the others, a
    longer sequence) keeps its own low end: more work is not a wait."""
    steps = [(0.010, 0.0, 0.0)] * 5 + [(0.050, 0.002, 0.001)]
    found = phase_wait(steps)
    assert found is not None
    assert found.part == pytest.approx(0.002 / 0.100)  # only the large step's 2 ms


def test_a_quiet_phase_lost_nothing_and_a_phase_that_never_ran_is_none() -> None:
    found = phase_wait([(0.003, 0.0, 0.0), (0.004, 0.0, 0.0), (0.0, 0.0, 0.0)])
    assert found is not None and found.part == 0.0 and found.typical == 0.0
    assert phase_wait([(0.0, 0.0, 0.0)]) is None and phase_wait([]) is None


def test_waits_are_at_most_the_phase_s_own_time() -> None:
    found = phase_wait([(0.002, 0.005, 0.004)] * 3)  # readings past the interval: at most all of it
    assert found is not None and found.part == pytest.approx(1.0) and found.typical == pytest.approx(1.0)
