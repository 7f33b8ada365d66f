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


def test_a_listener_is_told_each_stretch_on_detailed_steps_only() -> None:
    """The clock tells its listener (the load's wait meter) each stretch of host time as it charges it, the watcher's
    own time as skipped, and the step's close; on an edges-only step nothing."""
    t, told = [0.0], []

    class Listener:
        def charged(self, phase: str, seconds: float) -> None:
            told.append((phase, round(seconds, 6)))

        def skipped(self) -> None:
            told.append(("skipped", 0.0))

        def forget(self) -> None:
            told.append(("forget", 0.0))

        def closed(self) -> None:
            told.append(("closed", 0.0))

    c = PhaseClock(now=lambda: t[0])
    c.listen(Listener())
    c.enter("forward")
    t[0] += 0.010
    c.exit("forward")
    c.skip()
    t[0] += 0.001
    c.end_step()
    assert told == [("forget", 0.0), ("other", 0.0), ("forward", 0.01), ("skipped", 0.0), ("other", 0.001),
                    ("closed", 0.0)]
    told.clear()
    c.set_detailed(False)  # an edges-only step: nothing told
    c.enter("forward")
    t[0] += 0.01
    c.exit("forward")
    c.end_step()
    assert told == []
