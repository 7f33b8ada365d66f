"""Other processes' CPU use beside the watched run, and the process's threads' wait (`load/marks.py`,
`load/tracker.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from trainspeed.load.marks import LoadMark, mark, others_cores, siblings
from trainspeed.load.tracker import LoadTracker
from trainspeed.watch.phases import PHASES

BUSY = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass\n"


def test_others_are_the_machines_busy_seconds_less_ours() -> None:
    start, end = LoadMark(10.0, 100.0, 5.0), LoadMark(12.0, 104.0, 6.0)
    assert others_cores(start, end) == pytest.approx(1.5)  # 4 busy seconds in 2, one of them ours
    assert others_cores(start, LoadMark(12.0, 101.0, 6.5)) == 0.0  # counters tick apart: never below 0
    assert others_cores(start, LoadMark(10.3, 104.0, 6.0)) is None  # too short to tell
    assert others_cores(None, end) is None


def test_a_run_of_measured_steps_under_half_a_second_tells_the_load_from_the_watchs_start() -> None:
    tracker = LoadTracker(PHASES)
    tracker.opened = LoadMark(8.0, 90.0, 3.0, steal_s=1.0)
    tracker.start = LoadMark(11.9, 100.0, 5.0, steps=4, steal_s=1.2)
    tracker.end = LoadMark(12.0, 100.2, 5.1, steps=84, steal_s=1.2)
    found = tracker.part([], {}, None)
    # 4 s from the watch's start: 10.2 busy seconds, 2.1 of them ours
    assert found is not None and found.others_cpu_cores == pytest.approx(8.1 / 4)
    assert found.steal_share is not None and found.steal_share > 0
    tracker.start = LoadMark(11.0, 98.0, 4.0, steps=4)  # a second of steps: told from them alone
    found = tracker.part([], {}, None)
    assert found is not None and found.others_cpu_cores == pytest.approx((2.2 - 1.1) / 1.0)
    tracker.opened = None  # the counters unread as the watch opened: a short run stays untold
    tracker.start = LoadMark(11.9, 100.0, 5.0, steps=4)
    found = tracker.part([], {}, None)
    assert found is None or found.others_cpu_cores is None


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


class _Env(_Proc):
    """A stand-in process whose environment psutil read (`info`), as `psutil.process_iter(["environ"])` gives."""

    def __init__(self, pid: int, env: dict[str, str] | None) -> None:
        super().__init__(pid)
        self.info = {"environ": env}


def test_under_another_launcher_the_processes_of_the_same_rendezvous_are_the_jobs_ranks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A launcher that sets the env:// variables itself (a cluster's, a hand-written one): the processes on this host
    whose environment names this rank's rendezvous are its ranks; another job's ranks, a process that is no rank (the
    launching shell) and one whose environment could not be read are not."""
    job = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "2"}
    me = _Proc(10)
    procs = [_Env(10, {**job, "RANK": "0"}), _Env(11, {**job, "RANK": "1"}),
             _Env(12, {**job, "MASTER_PORT": "29501", "RANK": "1"}), _Env(13, job), _Env(14, None)]
    monkeypatch.setattr("trainspeed.load.marks.psutil.process_iter", lambda attrs: iter(procs))
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    for key, value in {**job, "RANK": "0"}.items():
        monkeypatch.setenv(key, value)
    assert [p.pid for p in siblings(me)] == [11]
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert siblings(me) == []


def test_a_phase_s_wait_is_the_part_its_detailed_steps_waited_of_its_share_of_the_mean_step() -> None:
    from trainspeed.load.result import StepWaits

    zero = dict.fromkeys(PHASES, 0.0)
    slow = ({**zero, "forward": 0.008, "other": 0.002}, StepWaits(*({**zero, "forward": 0.006},) * 3))
    fast = ({**zero, "forward": 0.001, "other": 0.001}, StepWaits(zero, zero, zero))
    shares = {**zero, "forward": 0.5, "other": 0.5}
    load = LoadTracker(PHASES).part([slow, fast], shares, 4.0)
    assert load is not None
    # 6 of forward's 9 ms waited; forward is 2 of the 4 ms mean step
    forward = load.phase("forward")
    assert (forward.wait_ms, forward.wait_share, forward.median_wait_share) == \
        pytest.approx((6 / 9 * 0.5 * 4.0, 6 / 9, (6 / 8 + 0) / 2))  # the median of two steps
    assert load.phase("other").wait_ms == 0.0
    assert LoadTracker(PHASES).part([], shares, 4.0) is None  # nothing read: no load part


def test_the_threads_waits_are_read_around_each_op_only_where_they_waited(monkeypatch) -> None:
    """The profiler window's op counter times each op less its threads' waits where the process's threads waited for a
    core 5% of the time since the watch started (other processes on the cores), or that is unknown: on a quiet machine
    the reads cost more than the rest of the counter's work on each op."""
    import trainspeed.load.tracker as tracker_module

    clock, waited = [100.0], [2.0]
    monkeypatch.setattr(tracker_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(tracker_module, "process_wait_s", lambda: waited[0])
    tracker = LoadTracker(PHASES)
    tracker._warm_from = (100.0, 2.0)
    clock[0], waited[0] = 110.0, 2.3  # 0.3 s of wait in 10 s: quiet
    assert not tracker.threads_waited()
    waited[0] = 2.6  # 0.6 s in 10 s: beside busy processes
    assert tracker.threads_waited()
    waited[0] = None  # type: ignore[call-overload]  # unread: the waits are read
    assert tracker.threads_waited()
    tracker._warm_from = None  # after the measured steps started: no warm-up to judge from
    assert tracker.threads_waited()
