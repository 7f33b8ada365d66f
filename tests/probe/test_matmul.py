"""The matmul probes: a rate at torch's threads, and at two thread counts in turn."""

from __future__ import annotations

import pytest
import torch

from trainspeed.probe.matmul import cpu_matmul_gflops, thread_gflops
from trainspeed.threads import intra_op_threads


def test_a_matmul_rate_is_its_flops_over_its_time() -> None:
    ticks = iter(range(100))
    # a fake clock: every product block takes one "second"
    rate = cpu_matmul_gflops(n=8, repeats=3, inner=5, now=lambda: float(next(ticks)))
    assert rate == 2 * 8**3 * 5 / 1e9


def test_thread_rates_run_at_each_count_and_put_the_threads_back() -> None:
    before = torch.get_num_threads()
    slow, fast = thread_gflops(64, (2, 1), rounds=2)
    assert slow > 0 and fast > 0
    assert torch.get_num_threads() == before


def test_each_dtype_is_compared_with_float32_in_turn_on_one_threads_cpu_time(monkeypatch) -> None:
    import time

    import trainspeed.probe.matmul as matmul

    calls: list[tuple[torch.dtype, int, object]] = []

    def fake(dtype=torch.float32, now=None, waited=None, **kw):
        calls.append((dtype, torch.get_num_threads(), now))
        assert waited is not None and waited() == 0.0  # a thread's CPU time holds no wait to take off
        return (100.0 if dtype == torch.float32 else 40.0) + len(calls)

    monkeypatch.setattr(matmul, "cpu_matmul_gflops", fake)
    before = torch.get_num_threads()
    pauses: list[float] = []
    ratios = matmul.dtype_ratios(["float64"], rounds=3, pause=pauses.append)
    assert [dtype for dtype, _, _ in calls] == [torch.float32, torch.float64] * 3  # in turn, not one then the other
    assert {threads for _, threads, _ in calls} == {1} and {now for *_, now in calls} == {time.thread_time}
    assert ratios == {"float64": pytest.approx((40.0 + 6) / (100.0 + 5))}  # each one's fastest
    assert pauses == [0.15, 0.15]  # rounds apart
    assert torch.get_num_threads() == before


def test_float64_against_float32_on_this_cpu_is_a_real_ratio() -> None:
    from trainspeed.probe.matmul import dtype_ratios

    ratio = dtype_ratios(["float64"], rounds=1)["float64"]
    assert 0.05 < ratio < 1.5  # float64 multiplies at most about as fast as float32 on any CPU


def test_a_reading_taken_while_a_core_was_held_gives_way_to_the_next_that_agrees() -> None:
    from trainspeed.probe.matmul import settled_gflops

    def readings(*rates: float):
        it = iter(rates)
        taken: list[float] = []
        return taken, lambda: taken.append(next(it)) or taken[-1]

    pauses: list[float] = []
    taken, measure = readings(194.0, 190.0)  # the earlier reading was slow, the next two agree
    assert settled_gflops([104.0], measure, pauses.append) == 194.0 and taken == [194.0, 190.0] and pauses == [0.1]
    pauses.clear()
    taken, measure = readings(180.0)  # readings that agree: no more
    assert settled_gflops([194.0, 185.0], measure, pauses.append) == 194.0 and taken == [180.0] and pauses == []
    taken, measure = readings(104.0, 103.0, 105.0, 104.0, 102.0)  # the core stays held: `more` readings at most,
    assert settled_gflops([194.0], measure, pauses.append, more=4) == 194.0 and len(taken) == 5  # pauses doubling
    assert pauses == [0.1, 0.2, 0.4, 0.8]
    taken, measure = readings(104.0)  # slow at every moment: slow it is
    assert settled_gflops([103.0], measure, pauses.append) == 104.0


def test_thread_rates_keep_each_counts_fastest_round_of_rounds_apart(monkeypatch) -> None:
    import trainspeed.probe.matmul as matmul

    # a core held by another tenant in the first round: two threads read the one-thread rate there
    readings = iter([100.0, 104.0, 101.0, 190.0, 99.0, 186.0])
    asked: list[int] = []
    monkeypatch.setattr(matmul, "cpu_matmul_gflops", lambda **kw: asked.append(torch.get_num_threads()) or
                        next(readings))
    pauses: list[float] = []
    assert matmul.thread_gflops(256, (1, 2), rounds=3, pause=pauses.append) == (101.0, 190.0)
    assert asked == [1, 2] * 3 and pauses == [0.15, 0.15]  # in turn, a pause between rounds


def test_readings_taken_on_free_cores_are_kept_and_the_others_left_out() -> None:
    ticks = iter(range(100))
    waits = iter([0.0, 0.5, 0.0, 0.0, 0.0, 0.9])  # per reading: (before, after); the first reading waited half of it
    rate = cpu_matmul_gflops(n=8, repeats=3, inner=5, now=lambda: float(next(ticks)), waited=lambda: next(waits))
    assert rate == 2 * 8**3 * 5 / 1e9  # the two readings on free cores, 1 s each


def test_where_every_reading_waited_each_counts_without_its_waits() -> None:
    """No reading on free cores: each counts between its time less the summed wait and less the longest one
    thread's (`load.probes.on_free_cores`); a stand-in wait that does not say the longest is taken as shared evenly,
    the least the longest can be. Three readings alike: their range's middle."""
    for threads, waited in ((1, 0.5), (2, 0.5), (2, 3.0)):  # 3 s summed over two threads in a reading of 1 s
        ticks, waits = iter(range(100)), iter([0.0, waited] * 3)
        with intra_op_threads(threads):
            rate = cpu_matmul_gflops(n=8, repeats=3, inner=5, now=lambda t=ticks: float(next(t)),  # type: ignore[misc]
                                     waited=lambda w=waits: next(w))  # type: ignore[misc]
        summed = min(waited, 1.0)
        assert rate == pytest.approx(2 * 8**3 * 5 / ((1 - summed + 1 - summed / threads) / 2) / 1e9)


class _Reader:
    """A stand-in for `load.waits.ThreadWait`: per call the summed wait, and the longest one thread's."""

    def __init__(self, readings: list[tuple[float, float]]) -> None:
        self.readings, self.longest = iter(readings), 0.0

    def __call__(self) -> float:
        summed, self.longest = next(self.readings)
        return summed


def test_a_reading_whose_one_thread_waited_alone_counts_its_whole_wait() -> None:
    """Two threads, every reading stalled: the first lost 0.8 s to one thread's wait while the other spun at the
    barrier (summed and longest alike), the others' threads waited at once. Each reading's range pins the work at
    0.2 s; the threads' share of the wait would have left 0.4 s of the first stall in."""
    ticks = iter(range(100))
    reader = _Reader([(0.0, 0.0), (0.8, 0.8), (0.0, 0.0), (1.2, 0.8), (0.0, 0.0), (1.0, 0.8)])
    with intra_op_threads(2):
        rate = cpu_matmul_gflops(n=8, repeats=3, inner=5, now=lambda: float(next(ticks)), waited=reader)
    assert rate == pytest.approx(2 * 8**3 * 5 / 0.2 / 1e9)


def test_readings_that_waited_all_their_time_keep_their_wall_time() -> None:
    """One reading, whose one thread waited all of it (a float64 probe's single round beside busy processes): its time
    without the waits is nothing, which tells nothing of the work; the rate is then its wall time's, not a division
    by zero in the user's report."""
    ticks, waits = iter(range(100)), iter([0.0, 1.0])
    with intra_op_threads(1):
        rate = cpu_matmul_gflops(n=8, repeats=1, inner=5, now=lambda: float(next(ticks)), waited=lambda: next(waits))
    assert rate == pytest.approx(2 * 8**3 * 5 / 1.0 / 1e9)
