"""Bounded statistics."""

from __future__ import annotations

from trainspeed.watch.stats import Reservoir, median, quantile


def test_reservoir_is_bounded_and_uniform_enough() -> None:
    r = Reservoir[int](size=100, seed=0)
    for i in range(100_000):
        r.add(i)
    assert r.seen == 100_000 and len(r.items) == 100
    assert 30_000 < sum(r.items) / len(r.items) < 70_000


def test_quantiles() -> None:
    assert quantile([], 0.5) is None and quantile([3.0], 0.9) == 3.0
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.9) == 4.6
    assert median([3.0, 1.0, 2.0]) == 2.0
