"""Other processes' CPU use beside the watched run."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from trainspeed.watch.machine_load import (
    LoadMark,
    MachineTracker,
    compiled,
    mark,
    others_cores,
    page_faults,
    siblings,
    worker_cpu,
)

BUSY = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass\n"


def test_others_are_the_machines_busy_seconds_less_ours() -> None:
    start, end = LoadMark(10.0, 100.0, 5.0), LoadMark(12.0, 104.0, 6.0)
    assert others_cores(start, end) == pytest.approx(1.5)  # 4 busy seconds in 2, one of them ours
    assert others_cores(start, LoadMark(12.0, 101.0, 6.5)) == 0.0  # counters tick apart: never below 0
    assert others_cores(start, LoadMark(10.3, 104.0, 6.0)) is None  # too short to tell
    assert others_cores(None, end) is None


def test_a_run_of_measured_steps_under_half_a_second_tells_the_load_from_the_watchs_start() -> None:
    tracker = MachineTracker()
    tracker.opened = LoadMark(8.0, 90.0, 3.0, steal_s=1.0)
    tracker.start = LoadMark(11.9, 100.0, 5.0, steps=4, steal_s=1.2)
    tracker.end = LoadMark(12.0, 100.2, 5.1, steps=84, steal_s=1.2)
    found = tracker.part()
    # 4 s from the watch's start: 10.2 busy seconds, 2.1 of them ours
    assert found.others_cpu_cores == pytest.approx(8.1 / 4)
    assert found.steal_share is not None and found.steal_share > 0
    tracker.start = LoadMark(11.0, 98.0, 4.0, steps=4)  # a second of steps: told from them alone
    assert tracker.part().others_cpu_cores == pytest.approx((2.2 - 1.1) / 1.0)
    tracker.opened = None  # the counters unread as the watch opened: a short run stays untold
    tracker.start = LoadMark(11.9, 100.0, 5.0, steps=4)
    assert tracker.part().others_cpu_cores is None


def test_the_workers_cpu_per_batch_is_their_children_seconds_over_the_batches_between_two_marks() -> None:
    start = LoadMark(10.0, 100.0, 5.0, children_s=1.0, worker_batches=6)
    found = worker_cpu(start, LoadMark(14.0, 108.0, 11.0, children_s=4.2, worker_batches=406))
    assert found is not None and found.batches == 400 and found.cpu_ms_per_batch == pytest.approx(8.0)
    assert worker_cpu(start, LoadMark(14.0, 108.0, 11.0, children_s=4.2, worker_batches=13)) is None  # 7: too few
    assert worker_cpu(None, start) is None


def test_the_compiles_between_two_marks_are_the_growth_of_dynamos_table() -> None:
    start = LoadMark(10.0, 100.0, 5.0, compiles=(1, 2.4))
    found = compiled(start, LoadMark(14.0, 108.0, 11.0, compiles=(3, 3.1)))
    assert found is not None and found.count == 2 and found.seconds == pytest.approx(0.7)
    assert compiled(start, LoadMark(14.0, 108.0, 11.0, compiles=(1, 2.4))) is None  # no new graph
    assert compiled(None, start) is None


def _others_over(seconds: float) -> float:
    start = mark()
    time.sleep(seconds)
    found = others_cores(start, mark())
    assert found is not None
    return found


def test_a_busy_child_process_is_ours_and_a_busy_stranger_is_not() -> None:
    # what the machine's other processes keep busy anyway (a shared machine: CI beside other jobs)
    baseline = _others_over(1.0)
    if baseline > (os.cpu_count() or 1) - 1:
        pytest.skip(f"other processes keep {baseline:.1f} cores busy: no core left to tell a busy process by")
    # a DataLoader's workers are children: their CPU is the run's own
    child = subprocess.Popen([sys.executable, "-c", BUSY.format(s=1.2)])
    start = mark()
    time.sleep(1.0)
    end = mark()
    child.wait()
    assert start is not None and end is not None
    assert end.ours_s - start.ours_s > 0.5
    assert others_cores(start, end) < baseline + 0.5  # type: ignore[operator]
    # a process this one did not start (its parent exits at once, so it is nobody's child here)
    subprocess.run(["sh", "-c", f'"{sys.executable}" -c "{BUSY.format(s=1.5)}" >/dev/null 2>&1 &'], check=True)
    time.sleep(0.2)
    start = mark()
    time.sleep(1.0)
    end = mark()
    assert others_cores(start, end) > baseline + 0.3  # type: ignore[operator]


def test_the_page_faults_per_step_are_the_growth_of_the_counter_over_the_steps_between_two_marks() -> None:
    start = LoadMark(10.0, 100.0, 5.0, steps=4, minor_faults=1000)
    assert page_faults(start, LoadMark(14.0, 108.0, 11.0, steps=104, minor_faults=51000)) == pytest.approx(500.0)
    assert page_faults(start, LoadMark(14.0, 108.0, 11.0, steps=4, minor_faults=9000)) is None  # no step between
    assert page_faults(start, LoadMark(14.0, 108.0, 11.0, steps=8, minor_faults=None)) is None  # unread (Windows)
    assert page_faults(None, start) is None


@pytest.mark.skipif(sys.platform == "win32", reason="the faults are read with the standard library's resource")
def test_a_mark_counts_the_fresh_pages_this_process_was_handed() -> None:
    import mmap

    start = mark(steps=0)
    with mmap.mmap(-1, 8 * 2**20) as m:  # 8 MiB never touched: each page's first write is a fault
        for i in range(0, len(m), mmap.PAGESIZE):
            m[i] = 1
        end = mark(steps=2)
    pages = 8 * 2**20 // mmap.PAGESIZE
    found = page_faults(start, end)
    assert found is not None and pages / 2 <= found < pages / 2 + 500  # per step, beside this test's own few


class _Proc:
    """A stand-in for psutil.Process: a pid, its children, its parent."""

    def __init__(self, pid: int, kids: list[_Proc] | None = None) -> None:
        self.pid, self.kids, self.up = pid, kids or [], None
        for k in self.kids:
            k.up = self

    def children(self, recursive: bool = False) -> list[_Proc]:
        return [d for k in self.kids for d in ([k] + (k.children(True) if recursive else []))]

    def parent(self) -> _Proc | None:
        return self.up


def test_under_torchrun_the_jobs_other_local_ranks_are_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = _Proc(12)
    me, other = _Proc(10, [_Proc(11)]), _Proc(20, [worker])
    _Proc(1, [me, other])  # the launcher: two ranks, each with a child
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert siblings(me) == []
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert [p.pid for p in siblings(me)] == [20, 12]
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert siblings(me) == []
