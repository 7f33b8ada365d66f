"""From trials to points: the median of each value's trials and its 95% bootstrap interval."""

from __future__ import annotations

from collections.abc import Callable

from trainspeed.stats import median
from trainspeed.sweep.result import SweepPoint, Trial
from trainspeed.sweep.stats import bootstrap_ci, overlap


def summarise(values: list[str], trials: list[Trial]) -> list[SweepPoint]:
    points = []
    for v in values:
        mine = [t for t in trials if t.value == v]
        ok = [t.seconds for t in mine if t.ok and t.seconds is not None]
        errors = [t.error for t in mine if not t.ok]
        if errors or not ok:
            points.append(SweepPoint(v, None, None, None, False, errors[0] if errors else "not run", len(mine)))
            continue
        low, high = bootstrap_ci(ok)
        extras: dict = {}
        for key in sorted({k for t in mine for k in t.extras}):
            nums = [t.extras[key] for t in mine if isinstance(t.extras.get(key), (int, float))]
            if nums:
                extras[key] = median(nums)
        points.append(SweepPoint(v, median(ok), low, high, True, "", len(ok), extras=extras))
    return points


Score = Callable[[SweepPoint], tuple[float, float, float]]
"""(score, low, high) of a point, higher better: by default the negated time and its interval."""


def by_time(p: SweepPoint) -> tuple[float, float, float]:
    assert p.median_s is not None and p.ci_low is not None and p.ci_high is not None
    return -p.median_s, -p.ci_high, -p.ci_low


def best_and_ties(points: list[SweepPoint], score: Score = by_time) -> tuple[str | None, list[str]]:
    """The best measured point, and the others whose interval overlaps its own (no measurable
    difference from the best)."""
    measured = [p for p in points if p.ok and not p.predicted and p.median_s is not None]
    if not measured:
        return None, []
    best = max(measured, key=lambda p: score(p)[0])
    _, lo, hi = score(best)
    ties = [p.value for p in measured if p is not best and overlap((lo, hi), score(p)[1:])]
    return best.value, ties
