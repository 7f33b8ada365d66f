"""Reading a thread's wait for a core, and charging it to the phases at the phase clock's edges (`load/waits.py`)."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trainspeed.load.waits import ThreadWait, WaitMeter, process_wait_s, thread_wait
from trainspeed.watch.phases import PHASES, PhaseClock

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="schedstat is Linux's")


@linux
def test_the_training_thread_s_wait_is_read_and_never_negative() -> None:
    reader = thread_wait()
    assert reader is not None
    sum(i * i for i in range(200_000))  # some work: the kernel's counters move on
    assert reader() >= 0.0 and reader() >= 0.0
    reader.close()
    total = process_wait_s()
    assert total is not None and total >= 0.0


@linux
def test_native_threads_are_added_and_python_s_are_not() -> None:
    import torch

    torch.ones(1000).add_(1)  # the intra-op pool exists
    reader = thread_wait()
    assert reader is not None
    seen = threading.Event()
    helper = threading.Thread(target=seen.wait)  # a Python thread: never counted
    helper.start()
    try:
        added = reader.add_native()
        python = {t.native_id for t in threading.enumerate()}
        tids = {int(t) for t in os.listdir("/proc/self/task")}
        assert added == len(tids - python - {os.getpid()})
        assert reader() >= 0.0
    finally:
        seen.set()
        helper.join()
        reader.close()


def test_a_thread_that_ended_takes_its_part_away_without_an_error() -> None:
    with tempfile.NamedTemporaryFile("w", suffix="schedstat", delete=False) as f:
        f.write("no numbers here\n")
    fd = os.open(f.name, os.O_RDONLY)
    try:
        assert ThreadWait(fd)() == 0.0
    finally:
        os.close(fd)
        os.unlink(f.name)


def test_a_reading_gives_the_threads_summed_wait_and_the_longest_one_s(tmp_path: Path) -> None:
    """Two threads' schedstat (on-CPU, waiting, slices, in ns): the reading sums what each waited since the last one,
    and keeps the longest one thread's wait (`ThreadWait.longest`)."""
    paths = [os.path.join(tmp_path, name) for name in ("main", "intra")]
    for path, waited in zip(paths, (1_000_000, 5_000_000), strict=True):
        with open(path, "w") as f:
            f.write(f"7 {waited} 3\n")
    fds = [os.open(path, os.O_RDONLY) for path in paths]
    try:
        reader = ThreadWait(fds[0])
        reader.follow(fds[1])
        for path, waited in zip(paths, (4_000_000, 6_000_000), strict=True):  # 3 ms and 1 ms more
            with open(path, "w") as f:
                f.write(f"7 {waited} 3\n")
        assert reader() == pytest.approx(0.004) and reader.longest == pytest.approx(0.003)
        assert reader.own == pytest.approx(0.003)  # the opening thread's (the training thread's) own
        # over an interval of 6 ms: at least one of them waited 6 * (1 - (3/6) * (5/6)) ms, had they waited apart
        assert reader.joint(0.006) == pytest.approx(0.006 * (1 - 0.5 * 5 / 6))
        assert reader() == 0.0 and reader.longest == 0.0 and reader.joint(0.006) == 0.0 and reader.own == 0.0
    finally:
        for fd in fds:
            os.close(fd)


def test_a_reading_of_long_ops_loses_about_its_longest_wait_and_of_short_ops_its_joint_wait(tmp_path: Path) -> None:
    """One wait's mean length is the threads' summed wait over the time slices they ran after waiting; where the
    interval's ops run far longer than that, each thread's part went on while the other waited and the interval
    lost about the longest one thread's wait (`op_lengths`); short ops keep the joint wait."""
    paths = [os.path.join(tmp_path, name) for name in ("main", "intra")]

    def write(waits: tuple[int, int], slices: tuple[int, int]) -> None:
        for path, waited, n in zip(paths, waits, slices, strict=True):
            with open(path, "w") as f:
                f.write(f"7 {waited} {n}\n")

    write((0, 0), (10, 10))
    fds = [os.open(path, os.O_RDONLY) for path in paths]
    try:
        reader = ThreadWait(fds[0])
        reader.follow(fds[1])
        write((120_000_000, 110_000_000), (25, 24))  # over 170 ms: 120 and 110 ms waited, in 15 and 14 waits
        assert reader() == pytest.approx(0.230)
        assert reader.one_wait == pytest.approx(0.230 / 29)
        joint, longest = 0.170 * (1 - (50 / 170) * (60 / 170)), 0.120
        assert reader.joint(0.170) == pytest.approx(joint)
        assert reader.joint(0.170, [(1.0, 1e-5)]) == pytest.approx(joint, rel=0.01)  # 10 us ops
        f = 0.011 / (0.011 + 0.230 / 29)  # 11 ms products
        assert reader.joint(0.170, [(1.0, 0.011)]) == pytest.approx(joint - f * (joint - longest))
        assert longest < reader.joint(0.170, [(1.0, 0.011)]) < joint
    finally:
        for fd in fds:
            os.close(fd)


class Reader:
    """A stand-in for `load.waits.ThreadWait`: each call gives the summed wait since the last one (`waited`), and
    the last reading's longest one thread's wait and the training thread's own (each the summed wait unless set)."""

    def __init__(self, joint: Callable[[float, Any], float] | None = None) -> None:
        self.waited = 0.0
        self.longest_next: float | None = None
        self.own_next: float | None = None
        self.longest = self.own = 0.0
        self._joint = joint

    def __call__(self) -> float:
        since, self.waited = self.waited, 0.0
        self.longest = since if self.longest_next is None else self.longest_next
        self.own = since if self.own_next is None else self.own_next
        return since

    def joint(self, seconds: float, lengths: Any = ()) -> float:
        return self._joint(seconds, lengths) if self._joint is not None else self.longest

    def close(self) -> None: ...


def _watched(reader: Reader) -> tuple[list[float], PhaseClock, WaitMeter]:
    t = [0.0]
    clock = PhaseClock(now=lambda: t[0])
    meter = WaitMeter(reader, PHASES)  # type: ignore[arg-type]
    clock.listen(meter)
    return t, clock, meter


def test_waits_for_a_core_go_to_the_phase_that_ran_on_detailed_steps_only() -> None:
    reader = Reader()
    t, c, meter = _watched(reader)
    c.enter("forward")
    t[0] += 0.010
    reader.waited += 0.004  # 4 of forward's 10 ms waiting for a core
    c.exit("forward")
    c.enter("optimizer")
    t[0] += 0.002
    reader.waited += 0.005  # a reading past the phase's own time: at most the phase's 2 ms
    c.exit("optimizer")
    c.skip()  # the watcher's own work: its wait is nobody's
    reader.waited += 0.003
    c.skip()
    t[0] += 0.001
    reader.waited += 0.0005
    c.end_step()
    waits = meter.last
    assert waits is not None
    assert waits.summed["forward"] == pytest.approx(0.004) and waits.summed["optimizer"] == pytest.approx(0.002)
    assert waits.summed["other"] == pytest.approx(0.0005)
    c.set_detailed(False)  # an edges-only step reads no wait
    c.enter("forward")
    reader.waited += 0.004
    t[0] += 0.01
    c.exit("forward")
    c.end_step()
    assert meter.last is waits  # nothing new: the watcher takes `last` on detailed steps only


def test_each_reading_s_longest_one_thread_wait_goes_to_the_phase_too() -> None:
    """Each phase also sums its readings' longest one thread's wait (the low bound of what it lost: `wait_bounds`),
    at most the reading's summed wait."""
    reader = Reader()
    t, c, meter = _watched(reader)
    c.enter("forward")
    t[0] += 0.010
    reader.waited, reader.longest_next = 0.006, 0.004  # two threads, 4 and 2 ms
    c.exit("forward")
    c.enter("backward")
    t[0] += 0.002
    reader.waited, reader.longest_next = 0.005, 0.005  # one thread, past the phase's own 2 ms
    c.exit("backward")
    c.end_step()
    waits = meter.last
    assert waits is not None
    assert waits.summed["forward"] == pytest.approx(0.006) and waits.longest["forward"] == pytest.approx(0.004)
    assert waits.summed["backward"] == pytest.approx(0.002) and waits.longest["backward"] == pytest.approx(0.002)


def test_a_save_and_a_data_wait_are_charged_the_training_thread_s_own_wait_only() -> None:
    """A save and a data wait run on the training thread alone: torch's intra-op threads, spinning after the last
    parallel op, may wait for a core meanwhile and delay nothing, so those phases are charged that thread's own wait
    (all three sums); a parallel phase keeps every thread's."""
    reader = Reader(joint=lambda seconds, lengths: min(reader.longest, seconds))
    t, c, meter = _watched(reader)
    c.enter("optimizer")
    t[0] += 0.010
    reader.waited, reader.longest_next, reader.own_next = 0.008, 0.005, 0.003  # the training thread 3 ms, another 5
    c.exit("optimizer")
    c.enter("checkpoint")
    t[0] += 0.020
    reader.waited, reader.longest_next, reader.own_next = 0.009, 0.008, 0.001  # the other's 8 ms came as it spun
    c.exit("checkpoint")
    c.enter("data")
    t[0] += 0.005
    reader.waited, reader.longest_next, reader.own_next = 0.004, 0.003, 0.002  # the next batch: 2 ms of its own
    c.exit("data")
    c.end_step()
    waits = meter.last
    assert waits is not None
    assert waits.summed["optimizer"] == pytest.approx(0.008) and waits.longest["optimizer"] == pytest.approx(0.005)
    for sums in (waits.summed, waits.longest, waits.joint):
        assert sums["checkpoint"] == pytest.approx(0.001) and sums["data"] == pytest.approx(0.002)


def test_each_phase_s_readings_are_joined_given_its_own_ops() -> None:
    """The meter hands each reading's joining the ops of the phase it charges (`ops_known`, from the profiler
    window): a phase of long products and one of small ops join the same waits differently."""
    asked = []

    def joint(seconds: float, lengths: Any) -> float:
        asked.append(lengths)
        return 0.002 if lengths else 0.004

    reader = Reader(joint)
    t, c, meter = _watched(reader)
    meter.ops_known({"forward": ((1.0, 0.011),)})
    c.enter("forward")
    t[0] += 0.010
    reader.waited = 0.005
    c.exit("forward")
    c.enter("optimizer")
    t[0] += 0.010
    reader.waited = 0.005
    c.exit("optimizer")
    c.end_step()
    assert asked[:2] == [((1.0, 0.011),), ()]
    assert meter.last is not None
    assert meter.last.joint["forward"] == pytest.approx(0.002) and meter.last.joint["optimizer"] == pytest.approx(0.004)


def test_a_step_started_over_forgets_its_waits() -> None:
    """A step the watcher drops, or starts over (the profiler window opened), keeps no wait for the next one."""
    reader = Reader()
    t, c, meter = _watched(reader)
    c.enter("forward")
    t[0] += 0.010
    reader.waited = 0.004
    c.exit("forward")
    c.drop_step()
    c.enter("backward")
    t[0] += 0.010
    reader.waited = 0.002
    c.exit("backward")
    c.end_step()
    assert meter.last is not None
    assert meter.last.summed["forward"] == 0.0 and meter.last.summed["backward"] == pytest.approx(0.002)
