"""Whether the run's threads took turns on one CPU (`load/core_sharing.py`): counted from each thread's state and
CPU, and read from this process's own threads."""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch

from trainspeed.load import core_sharing
from trainspeed.load.core_sharing import MIN_SAMPLES, CoreSharing


def test_two_runnable_threads_on_one_cpu_count_and_on_two_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[dict[int, tuple[str, int]]] = []
    monkeypatch.setattr(core_sharing, "_state_cpu", lambda fd: reads[-1][fd])
    c = CoreSharing()
    for fd in c.fds.values():
        os.close(fd)
    c.fds = {1: 10, 2: 11, 3: 12}
    rounds = [{10: ("R", 0), 11: ("R", 0), 12: ("S", 1)}] * 15 + \
             [{10: ("R", 0), 11: ("R", 1), 12: ("S", 1)}] * 5 + \
             [{10: ("R", 0), 11: ("S", 0), 12: ("S", 0)}] * 7  # one runnable: no sample of two
    for r in rounds:
        reads.append(r)
        c.sample()
    assert (c.runnable, c.one_cpu) == (20, 15) and c.share() == pytest.approx(0.75)
    c.reset()
    assert c.share() is None  # under MIN_SAMPLES samples of two runnable


def test_an_ended_thread_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    c = CoreSharing()
    dead = os.open("/dev/null", os.O_RDONLY)
    c.fds[1 << 30] = dead
    c.sample()  # /dev/null reads no stat: the thread ended
    assert (1 << 30) not in c.fds
    c.close()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or not os.path.exists("/proc/self/task"),
                    reason="needs Linux's /proc and thread affinity")
def test_torch_threads_pinned_to_one_cpu_read_as_taking_turns() -> None:
    """This process's training thread and torch's intra-op threads, every one pinned to one CPU, multiplying
    matrices: every sample with two of them runnable has them on that CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    a = torch.randn(256, 256)
    a @ a  # the intra-op pool starts
    tids = [int(t) for t in os.listdir("/proc/self/task")]
    kept = {tid: os.sched_getaffinity(tid) for tid in tids}
    cpu = min(os.sched_getaffinity(0))
    c = CoreSharing()
    c.follow_threads()
    halt = threading.Event()

    def sample() -> None:
        while not halt.wait(0.005):
            c.sample()

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        for tid in tids:
            os.sched_setaffinity(tid, {cpu})
        sampler.start()
        end = time.perf_counter() + 1.5
        while time.perf_counter() < end and c.runnable < 4 * MIN_SAMPLES:
            a @ a
    finally:
        halt.set()
        sampler.join()
        for tid, cpus in kept.items():
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:
                pass
        torch.set_num_threads(before)
        c.close()
    assert c.runnable >= MIN_SAMPLES and c.share() == 1.0
