"""PhaseClock: exclusive phase time with a fake clock."""

from __future__ import annotations

import itertools

import pytest

from trainspeed.watch.phases import PHASES, PhaseClock


def test_nested_phases_are_exclusive_and_other_is_the_rest() -> None:
    ticks = iter([0.0, 1.0, 2.0, 2.5, 3.0, 4.0, 6.0])
    clock = PhaseClock(now=lambda: next(ticks))  # t=0: step starts
    clock.enter("forward")  # t=1: 1 s of other
    clock.enter("sync")  # t=2: 1 s of forward
    clock.exit("sync")  # t=2.5: 0.5 s of sync
    clock.exit("forward")  # t=3: 0.5 s more forward
    clock.enter("backward")  # t=4: 1 s other
    wall, phases = clock.end_step()  # t=6: 2 s backward (still open)
    assert wall == 6.0
    assert phases["other"] == 2.0 and phases["forward"] == 1.5 and phases["sync"] == 0.5 and phases["backward"] == 2.0
    assert sum(phases.values()) == pytest.approx(wall)
    assert set(phases) == set(PHASES)


def test_unbalanced_exit_unwinds_to_the_phase() -> None:
    t = itertools.count()
    clock = PhaseClock(now=lambda: float(next(t)))
    clock.enter("forward")
    clock.enter("sync")  # an exception skipped sync's exit
    clock.exit("forward")
    assert clock.active is None


def test_span_charges_before_to_the_open_phase_and_the_span_to_its_phase() -> None:
    ticks = iter([0.0, 1.0, 10.0])
    clock = PhaseClock(now=lambda: next(ticks))  # t=0: step starts
    clock.enter("forward")  # t=1
    clock.span("sync", 3.0, 7.0)  # forward 1..3, sync 3..7
    wall, phases = clock.end_step()  # t=10: forward 7..10
    assert wall == 10.0
    assert phases["forward"] == 5.0 and phases["sync"] == 4.0 and phases["other"] == 1.0


def test_a_dropped_step_leaves_nothing_to_the_next_one() -> None:
    ticks = iter([0.0, 1.0, 3.0, 4.0, 9.0])
    clock = PhaseClock(now=lambda: next(ticks))  # t=0: step starts
    clock.enter("backward")  # t=1
    clock.span("sync", 1.5, 2.0)
    clock.drop_step()  # t=3: nobody keeps this step; backward is still open
    clock.span("sync", 3.5, 3.75)
    clock.exit("backward")  # t=4
    wall, phases = clock.end_step()  # t=9
    assert wall == 6.0  # from the drop on
    assert phases["backward"] == pytest.approx(0.75) and phases["sync"] == 0.25 and phases["other"] == 5.0
    assert sum(phases.values()) == pytest.approx(wall)


def test_sums_take_every_closed_step_kept_or_dropped_from_start_sums_on() -> None:
    ticks = iter([0.0, 1.0, 2.0, 3.0, 5.0, 6.0, 8.0])
    clock = PhaseClock(now=lambda: next(ticks))  # t=0: step starts
    clock.span("sync", 0.5, 0.75)
    clock.end_step()  # t=1: before the sums start
    assert clock.summed() is None
    clock.start_sums()
    assert clock.summed() is None  # no step closed since
    clock.enter("data")  # t=2
    clock.exit("data")  # t=3: 1 s data
    clock.span("sync", 3.5, 4.0)
    clock.drop_step()  # t=5: a dropped step still counts
    clock.enter("checkpoint")  # t=6
    clock.span("sync", 6.0, 6.5)  # inside the checkpoint: sync, not checkpoint
    _, phases = clock.end_step()  # t=8: checkpoint 0..0 + 6.5..8
    seconds, wall = clock.summed() or ({}, 0.0)
    assert wall == 7.0  # t=1..8
    assert seconds == {"data": 1.0, "h2d": 0.0, "sync": 1.0, "checkpoint": 1.5}
    assert phases["checkpoint"] == 1.5 and phases["sync"] == 0.5


def test_the_call_phases_are_summed_over_the_detailed_steps_only() -> None:
    ticks = iter([0.0, 1.0, 3.0, 4.0, 9.0, 10.0, 11.0, 13.0])
    clock = PhaseClock(now=lambda: next(ticks))  # t=0: the first summed step starts
    clock.start_sums()
    assert clock.call_split() is None
    clock.enter("forward")  # t=1
    clock.exit("forward")  # t=3: 2 s forward
    clock.end_step()  # t=4: 2 s other (0..1, 3..4)
    clock.detailed = False  # an edges-only step: forward not split out, all of it other
    clock.enter("forward")  # t=9
    clock.exit("forward")  # t=10
    clock.end_step()  # t=11
    clock.detailed = True
    clock.enter("backward")  # t=13 ... and a dropped detailed step counts too
    clock.now = lambda: 14.0
    clock.drop_step()
    assert clock.call_split() == {"forward": 2.0, "backward": 1.0, "optimizer": 0.0, "other": 4.0}


def test_leaving_at_a_depth_closes_what_was_opened_above_it() -> None:
    ticks = iter([0.0, 1.0, 2.0, 4.0, 7.0])
    clock = PhaseClock(now=lambda: next(ticks))  # t=0: step starts
    clock.enter("optimizer")  # t=1: the whole optimizer.step() call, entered at depth 0
    clock.enter("optimizer")  # t=2: its pre hook; an exception skips the post hook's exit
    clock.leave(0)  # t=4: the call unwinds: 3 s of optimizer, nothing left open
    assert clock.active is None
    wall, phases = clock.end_step()  # t=7
    assert phases["optimizer"] == 3.0 and phases["other"] == 4.0 and wall == 7.0


def test_skipped_time_is_no_steps_and_out_of_the_summed_wall() -> None:
    """The watcher's own work at a step's end: no phase gets it, the next step starts after it, and the
    sums' wall leaves it out, so summed shares still add up with the steps' own."""
    ticks = iter([0.0, 1.0, 1.5, 3.5, 4.0, 4.0])
    clock = PhaseClock(now=lambda: next(ticks))  # t=0
    clock.start_sums()  # the step running now is the first summed
    clock.enter("sync")  # t=1
    clock.exit("sync")  # t=1.5
    wall, phases = clock.end_step()  # t=3.5: 3.5 s step
    clock.skip()  # t=4: 0.5 s of the watcher's own
    assert clock.step_started == 4.0 and wall == 3.5
    wall, phases = clock.end_step()  # t=4: the next step ran 0 s, not 0.5 s
    assert wall == 0.0 and sum(phases.values()) == 0.0
    seconds, summed_wall = clock.summed() or ({}, 0.0)
    assert summed_wall == 3.5 and seconds["sync"] == 0.5


def test_waits_for_a_core_go_to_the_phase_that_ran_on_detailed_steps_only() -> None:
    t, waited = [0.0], [0.0]  # the clock, and the thread's run-queue wait not read yet, both in seconds

    def read() -> float:
        since, waited[0] = waited[0], 0.0
        return since

    c = PhaseClock(now=lambda: t[0])
    c.watch_waits(read)
    c.enter("forward")
    t[0] += 0.010
    waited[0] += 0.004  # 4 of forward's 10 ms waiting for a core
    c.exit("forward")
    c.enter("optimizer")
    t[0] += 0.002
    waited[0] += 0.005  # a reading past the phase's own time: at most the phase's 2 ms
    c.exit("optimizer")
    c.skip()  # the watcher's own work: its wait is nobody's
    waited[0] += 0.003
    c.skip()
    t[0] += 0.001
    waited[0] += 0.0005
    c.end_step()
    assert c.step_waits is not None
    assert c.step_waits["forward"] == pytest.approx(0.004) and c.step_waits["optimizer"] == pytest.approx(0.002)
    assert c.step_waits["other"] == pytest.approx(0.0005)
    c.set_detailed(False)  # an edges-only step reads no wait
    c.enter("forward")
    waited[0] += 0.004
    t[0] += 0.01
    c.exit("forward")
    c.end_step()
    assert c.step_waits is None


def test_each_reading_s_longest_one_thread_wait_goes_to_the_phase_too() -> None:
    """With a reader of the longest one thread's wait, each phase also sums those (the low bound of what it lost:
    `wait_bounds`), at most the reading's summed wait; without one, the summed wait stands for it."""
    t, waited, longest = [0.0], [0.0], [0.0]

    def read() -> float:
        since, waited[0] = waited[0], 0.0
        return since

    c = PhaseClock(now=lambda: t[0])
    c.watch_waits(read, lambda: longest[0])
    c.enter("forward")
    t[0] += 0.010
    waited[0], longest[0] = 0.006, 0.004  # two threads, 4 and 2 ms
    c.exit("forward")
    c.enter("backward")
    t[0] += 0.002
    waited[0], longest[0] = 0.005, 0.005  # one thread, past the phase's own 2 ms
    c.exit("backward")
    c.end_step()
    assert c.step_waits is not None and c.step_longest is not None
    assert c.step_waits["forward"] == pytest.approx(0.006) and c.step_longest["forward"] == pytest.approx(0.004)
    assert c.step_waits["backward"] == pytest.approx(0.002) and c.step_longest["backward"] == pytest.approx(0.002)
    plain = PhaseClock(now=lambda: t[0])
    plain.watch_waits(read)
    plain.enter("forward")
    t[0] += 0.010
    waited[0] = 0.003
    plain.exit("forward")
    plain.end_step()
    assert plain.step_longest is not None and plain.step_longest["forward"] == pytest.approx(0.003)


def test_a_save_and_a_data_wait_are_charged_the_training_thread_s_own_wait_only() -> None:
    """A save and a data wait run on the training thread alone: torch's intra-op threads, spinning after the last
    parallel op, may wait for a core meanwhile and delay nothing, so those phases are charged that thread's own wait
    (all three sums); a parallel phase keeps every thread's."""
    t, waited, longest, own = [0.0], [0.0], [0.0], [0.0]

    def read() -> float:
        return waited[0]

    c = PhaseClock(now=lambda: t[0])
    c.watch_waits(read, lambda: longest[0], lambda seconds, lengths: min(waited[0], seconds), lambda: own[0])
    c.enter("optimizer")
    t[0] += 0.010
    waited[0], longest[0], own[0] = 0.008, 0.005, 0.003  # the training thread 3 ms, an intra-op thread 5
    c.exit("optimizer")
    c.enter("checkpoint")
    t[0] += 0.020
    waited[0], longest[0], own[0] = 0.009, 0.008, 0.001  # the intra-op thread's 8 ms came while it spun
    c.exit("checkpoint")
    c.enter("data")
    t[0] += 0.005
    waited[0], longest[0], own[0] = 0.004, 0.003, 0.002  # the next batch: the training thread woke and waited 2 ms
    c.exit("data")
    c.end_step()
    assert c.step_waits is not None and c.step_longest is not None and c.step_joint is not None
    assert c.step_waits["optimizer"] == pytest.approx(0.008) and c.step_longest["optimizer"] == pytest.approx(0.005)
    for sums in (c.step_waits, c.step_longest, c.step_joint):
        assert sums["checkpoint"] == pytest.approx(0.001) and sums["data"] == pytest.approx(0.002)


def test_each_phase_s_readings_are_joined_given_its_own_ops() -> None:
    """The clock hands each reading's joining the ops of the phase it charges (`op_lengths`, from the profiler
    window): a phase of long products and one of small ops join the same waits differently."""
    t, asked = [0.0], []

    def joint(seconds: float, lengths: object) -> float:
        asked.append(lengths)
        return 0.002 if lengths else 0.004

    c = PhaseClock(now=lambda: t[0])
    c.op_lengths = {"forward": ((1.0, 0.011),)}
    c.watch_waits(lambda: 0.005, lambda: 0.002, joint)
    c.enter("forward")
    t[0] += 0.010
    c.exit("forward")
    c.enter("optimizer")
    t[0] += 0.010
    c.exit("optimizer")
    c.end_step()
    assert asked[:2] == [((1.0, 0.011),), ()]
    assert c.step_joint is not None
    assert c.step_joint["forward"] == pytest.approx(0.002) and c.step_joint["optimizer"] == pytest.approx(0.004)
