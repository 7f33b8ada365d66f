"""Reading a thread's wait for a core (`watch/run_queue.py`)."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from trainspeed.watch.run_queue import ThreadWait, process_wait_s, thread_wait

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
