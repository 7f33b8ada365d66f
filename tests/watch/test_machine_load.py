"""Other processes' CPU use beside the watched run."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from trainspeed.watch.machine_load import LoadMark, mark, others_cores

BUSY = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass\n"


def test_others_are_the_machines_busy_seconds_less_ours() -> None:
    start, end = LoadMark(10.0, 100.0, 5.0), LoadMark(12.0, 104.0, 6.0)
    assert others_cores(start, end) == pytest.approx(1.5)  # 4 busy seconds in 2, one of them ours
    assert others_cores(start, LoadMark(12.0, 101.0, 6.5)) == 0.0  # counters tick apart: never below 0
    assert others_cores(start, LoadMark(10.3, 104.0, 6.0)) is None  # too short to tell
    assert others_cores(None, end) is None


def test_a_busy_child_process_is_ours_and_a_busy_stranger_is_not() -> None:
    # a DataLoader's workers are children: their CPU is the run's own
    child = subprocess.Popen([sys.executable, "-c", BUSY.format(s=1.2)])
    start = mark()
    time.sleep(1.0)
    end = mark()
    child.wait()
    assert start is not None and end is not None
    assert end.ours_s - start.ours_s > 0.5
    assert others_cores(start, end) < 0.5  # type: ignore[operator]
    # a process this one did not start (its parent exits at once, so it is nobody's child here)
    subprocess.run(["sh", "-c", f'"{sys.executable}" -c "{BUSY.format(s=1.5)}" >/dev/null 2>&1 &'], check=True)
    time.sleep(0.2)
    start = mark()
    time.sleep(1.0)
    end = mark()
    assert others_cores(start, end) > 0.5  # type: ignore[operator]
