"""What one minor page fault costs: counted by the system, timed beside the same writes without faults."""

from __future__ import annotations

import sys

import pytest

from trainspeed.probe import page_faults as probe
from trainspeed.threads import intra_op_threads


@pytest.mark.skipif(sys.platform == "win32", reason="the faults are read with the standard library's resource")
def test_a_fault_costs_more_than_nothing_and_less_than_a_millisecond() -> None:
    us = probe.page_fault_us(size=8 * 2**20, repeats=2)
    assert us is not None and 0.0 < us < 1000.0


def test_where_faults_cannot_be_counted_there_is_no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "minor_faults", lambda: None)  # no `resource` module (Windows)
    assert probe.page_fault_us(size=2**20) is None


def test_a_mapping_that_never_faults_gives_no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe, "minor_faults", lambda: 7)  # the counter never moves: nothing to divide by
    assert probe.page_fault_us(size=2**20, repeats=1) is None


def test_a_fill_that_waited_for_a_core_gives_way_to_one_threads_cpu_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reading whose faulting fill waited for a core is not used; where every reading waited, the CPU time one fault
    costs its thread, over torch's threads, is the reading (a stand-in for it here); a reading on free cores is the
    fill's wall time less the plain rewrite's."""
    monkeypatch.setattr(probe, "_one_thread_us", lambda size, repeats: 3.0)
    with intra_op_threads(2):
        waits = iter([0.0, 100.0, 0.0] * 5)  # per reading: before the fills, after the faulting one, after the rewrite
        assert probe.page_fault_us(size=2**20, waited=lambda: next(waits)) == 1.5
        quiet = probe.page_fault_us(size=2**20, waited=lambda: 0.0)
    assert quiet is None or (quiet >= 0.0 and quiet != 1.5)


@pytest.mark.skipif(sys.platform == "win32", reason="the faults are read with the standard library's resource")
def test_one_threads_cpu_time_per_fault_is_a_real_cost() -> None:
    us = probe._one_thread_us(size=8 * 2**20, repeats=2)
    assert us is not None and 0.0 < us < 1000.0
