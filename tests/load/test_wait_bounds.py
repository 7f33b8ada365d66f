"""What a phase lost to waiting for a core, from its steps' bounds (`load/wait_bounds.py`)."""

from __future__ import annotations

import pytest

from trainspeed.load.wait_bounds import phase_wait


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


def test_the_joint_point_takes_each_step_where_its_threads_waited_independently() -> None:
    """Where every thread waited most of each step (busy processes in sessions of their own, each given as much of
    the cores as the whole run), the summed waits pass the wall time and every range's low end is 0: the median of
    the ends took the image classifier's forward to nothing. The joint point (the time at least one thread waited,
    had they waited at moments independent of each other) keeps the work between the bounds."""
    from trainspeed.load.waits import joint_wait

    steps = []
    for wall, waits in ((0.145, (0.120, 0.092)), (0.385, (0.320, 0.310)), (0.106, (0.086, 0.100))):
        summed, longest = sum(waits), max(waits)
        steps.append((wall, summed, longest, joint_wait(list(waits), wall)))
    ends_only = phase_wait([s[:3] for s in steps])
    found = phase_wait(steps)
    assert ends_only is not None and found is not None
    wall = sum(s[0] for s in steps)
    # the ends' median: three of the six ends are 0, the next the third step's high end (6 ms) - 3 ms a step left
    assert ends_only.part == pytest.approx(1 - 3 * 0.003 / wall)
    points = sorted(w - joint for w, _, _, joint in steps)
    net = points[1]  # the median point: 9.1 ms, the first step's
    assert 0.009 < net < 0.0095
    kept = sum(min(net, w - longest) for w, _, longest, _ in steps)  # the third step's range ends at 6 ms
    assert found.part == pytest.approx(1 - kept / wall)
    assert (1 - found.part) > 2.5 * (1 - ends_only.part)  # 24 ms of work left in the three steps, not 9


def test_joint_wait_lies_between_the_longest_and_the_summed_wait() -> None:
    from trainspeed.load.waits import joint_wait

    assert joint_wait([0.003, 0.003], 0.007) == pytest.approx(0.007 * (1 - (4 / 7) ** 2))
    for waits, seconds in (([0.003, 0.003], 0.007), ([0.009, 0.001], 0.010), ([0.002], 0.004), ([0.005, 0.006], 0.006)):
        joint = joint_wait(waits, seconds)
        assert max(min(w, seconds) for w in waits) <= joint + 1e-12
        assert joint <= min(sum(waits), seconds) + 1e-12
    assert joint_wait([0.001], 0.0) == 0.0 and joint_wait([], 0.005) == 0.0


def test_readings_without_a_joint_point_keep_the_median_of_the_ends() -> None:
    from trainspeed.load.wait_bounds import without_waits

    readings = [(0.016, 0.012, 0.006), (0.014, 0.008, 0.004, 0.006)]  # one has no point: both take the ends'
    assert without_waits(readings) == without_waits([r[:3] for r in readings])
