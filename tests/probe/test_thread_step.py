"""probe/thread_step.py: a small training step's time at two thread counts, in turn, each count's fastest."""

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
