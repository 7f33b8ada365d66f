"""The machine's facts beside the run: the DataLoader workers' CPU, compiles and page faults (`watch/machine_load.py`)."""

from __future__ import annotations

import sys

import pytest

from trainspeed.watch.machine_load import MachineMark, compiled, mark, page_faults, worker_cpu


def test_the_workers_cpu_per_batch_is_their_children_seconds_over_the_batches_between_two_marks() -> None:
    start = MachineMark(10.0, children_s=1.0, worker_batches=6)
    found = worker_cpu(start, MachineMark(14.0, children_s=4.2, worker_batches=406))
    assert found is not None and found.batches == 400 and found.cpu_ms_per_batch == pytest.approx(8.0)
    assert worker_cpu(start, MachineMark(14.0, children_s=4.2, worker_batches=13)) is None  # 7: too few
    assert worker_cpu(None, start) is None


def test_the_compiles_between_two_marks_are_the_growth_of_dynamos_table() -> None:
    start = MachineMark(10.0, compiles=(1, 2.4))
    found = compiled(start, MachineMark(14.0, compiles=(3, 3.1)))
    assert found is not None and found.count == 2 and found.seconds == pytest.approx(0.7)
    assert compiled(start, MachineMark(14.0, compiles=(1, 2.4))) is None  # no new graph
    assert compiled(None, start) is None


def test_the_page_faults_per_step_are_the_growth_of_the_counter_over_the_steps_between_two_marks() -> None:
    start = MachineMark(10.0, steps=4, minor_faults=1000)
    assert page_faults(start, MachineMark(14.0, steps=104, minor_faults=51000)) == pytest.approx(500.0)
    assert page_faults(start, MachineMark(14.0, steps=4, minor_faults=9000)) is None  # no step between
    assert page_faults(start, MachineMark(14.0, steps=8, minor_faults=None)) is None  # unread (Windows)
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
