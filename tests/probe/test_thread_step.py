"""probe/thread_step.py: a small training step's time at two thread counts, in turn: each count's fastest, or beside
busy processes each count's median mean step."""

from __future__ import annotations

import pytest
import torch

from trainspeed.probe import thread_step


def test_a_step_is_timed_at_each_count_in_turn_and_the_fastest_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    times = iter([9.0, 4.0, 7.0, 5.0, 8.0, 3.0])

    def step(side: int) -> float:
        seen.append(torch.get_num_threads())
        return next(times)

    monkeypatch.setattr(thread_step, "_step_ms", step)
    pauses: list[float] = []
    assert thread_step.thread_step_ms(64, (2, 1), rounds=3, pause=pauses.append) == (7.0, 3.0)
    assert seen == [2, 1, 2, 1, 2, 1] and pauses == [thread_step.ROUND_PAUSE_S] * 2


def test_a_real_step_takes_some_time() -> None:
    ms = thread_step._step_ms(32)
    assert 0 < ms < 1000


def test_beside_busy_processes_each_count_s_mean_step_is_read_in_turn_and_the_median_round_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    times = iter([9.0, 4.0, 30.0, 5.0, 8.0, 3.0])  # a round of the run's count that lost more slices

    def step(side: int) -> float:
        seen.append(torch.get_num_threads())
        return next(times)

    monkeypatch.setattr(thread_step, "_mean_step_ms", step)
    assert thread_step.loaded_step_ms(64, (2, 1), rounds=3) == (9.0, 4.0)
    assert seen == [2, 1, 2, 1, 2, 1]


def test_a_mean_step_is_the_time_over_the_timed_steps_a_few_at_least(monkeypatch: pytest.MonkeyPatch) -> None:
    t, ran = [0.0], [0]

    def step() -> None:  # each step takes 1/64 s of the fake clock (binary-exact sums)
        ran[0] += 1
        t[0] += 1 / 64

    monkeypatch.setattr(thread_step, "_mlp", lambda side: step)
    assert thread_step._mean_step_ms(16, seconds=0.0, now=lambda: t[0]) == 1000 / 64
    assert ran[0] == 2 + thread_step.LOADED_STEPS  # two untimed, then the fewest timed
    ran[0] = 0
    assert thread_step._mean_step_ms(16, seconds=0.25, now=lambda: t[0]) == 1000 / 64
    assert ran[0] == 2 + 16  # a quarter second of 1/64 s steps


def test_a_real_mean_step_takes_some_time() -> None:
    assert 0 < thread_step._mean_step_ms(16, seconds=0.02) < 1000
