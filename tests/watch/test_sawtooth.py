"""Saw-tooth detection on synthetic utilisation traces."""

from __future__ import annotations

from trainspeed.watch.sawtooth import detect_sawtooth


def _trace(pattern: list[float], repeats: int, dt: float) -> tuple[list[float], list[float]]:
    util = pattern * repeats
    return util, [i * dt for i in range(len(util))]


def test_idle_busy_with_the_step_rhythm_is_a_sawtooth() -> None:
    util, times = _trace([0, 0, 99, 99], 30, 0.05)  # one idle/busy cycle per 0.2 s
    saw, why = detect_sawtooth(util, times, step_period_s=0.2)
    assert saw, why


def test_steady_busy_is_not() -> None:
    util, times = _trace([97, 99, 98, 99], 30, 0.05)
    assert not detect_sawtooth(util, times, 0.2)[0]


def test_slow_swings_are_phases_not_steps() -> None:
    util, times = _trace([0] * 50 + [99] * 50, 2, 0.05)  # 5 s idle, 5 s busy
    assert not detect_sawtooth(util, times, 0.01)[0]


def test_too_few_samples() -> None:
    saw, why = detect_sawtooth([0, 99], [0.0, 0.1], 0.1)
    assert not saw and "too few" in why
