"""Bounded statistics."""

from __future__ import annotations

from trainspeed.stats import median, quantile
from trainspeed.watch.samples import Reservoir


def test_reservoir_is_bounded_and_uniform_enough() -> None:
    r = Reservoir[int](size=100, seed=0)
    for i in range(100_000):
        r.add(i)
    assert r.seen == 100_000 and len(r.items) == 100
    assert 30_000 < sum(r.items) / len(r.items) < 70_000


def test_reservoir_says_in_advance_which_items_it_keeps_and_stays_uniform() -> None:
    size, n, trials = 20, 400, 1500
    kept_by_quarter = [0, 0, 0, 0]
    for seed in range(trials):
        r = Reservoir[int](size=size, seed=seed)
        for i in range(n):
            if r.wants():
                before = list(r.items)
                r.add(i)
                assert i in r.items and len(set(before) - set(r.items)) <= 1
            else:
                r.skip()
        assert r.seen == n and len(r.items) == size == len(set(r.items))
        for x in r.items:
            kept_by_quarter[x * 4 // n] += 1
    expected = trials * size / 4
    assert all(abs(k / expected - 1) < 0.05 for k in kept_by_quarter), kept_by_quarter


def test_quantiles() -> None:
    assert quantile([], 0.5) is None and quantile([3.0], 0.9) == 3.0
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.9) == 4.6
    assert median([3.0, 1.0, 2.0]) == 2.0


def test_a_full_reservoir_says_how_many_items_in_a_row_it_passes_over() -> None:
    r = Reservoir[int](size=10, seed=3)
    for i in range(10):
        assert r.passes_over() == 0  # filling: every item is kept
        r.add(i)
    checked = 0
    while r.seen < 5000:
        gap = r.passes_over()
        for _ in range(gap):
            assert not r.wants()
            r.skip()
        assert r.wants()
        r.add(r.seen)
        checked += gap
    bulk = Reservoir[int](size=10, seed=3)  # the same stream, the passed-over items skipped in one go
    while bulk.seen < 5000:
        bulk.skip(bulk.passes_over())
        bulk.add(bulk.seen)
    assert checked > 4000 and bulk.items == r.items and bulk.seen == r.seen
