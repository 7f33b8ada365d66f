"""Statistics of a sweep: medians with bootstrap intervals, overlap, a straight-line fit, the knee.

Pure functions over lists of floats, so they are tested without running anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trainspeed.stats import BOOTSTRAP_RESAMPLES, resampled_medians

KNEE_SHARE = 0.9
"""The knee: the cheapest value that reaches this share of the best result."""


def bootstrap_ci(values: Sequence[float], level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median (a fixed seed: the same data gives the same interval)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("no values")
    if data.size == 1:
        return float(data[0]), float(data[0])
    medians = resampled_medians(data, np.random.default_rng(seed), resamples)
    tail = (1 - level) / 2
    low, high = np.quantile(medians, [tail, 1 - tail])
    return float(low), float(high)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Two intervals overlap: the sweep cannot tell the two points apart."""
    return a[0] <= b[1] and b[0] <= a[1]


@dataclass(frozen=True)
class LineFit:
    """y = a + b * x by least squares, with its coefficient of determination."""

    a: float
    b: float
    r2: float

    def __call__(self, x: float) -> float:
        return self.a + self.b * x


def line_fit(xs: Sequence[float], ys: Sequence[float]) -> LineFit:
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    if x.size < 2 or np.ptp(x) == 0:
        raise ValueError("a line needs at least two distinct x values")
    b, a = np.polyfit(x, y, 1)
    residual = float(np.sum((y - (a + b * x)) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - residual / total if total > 0 else 1.0
    return LineFit(float(a), float(b), r2)


def knee(scores: Sequence[float], share: float = KNEE_SHARE) -> int | None:
    """Index of the first point (in increasing-cost order) whose score reaches
    `share` of the best score (higher is better); None with no scores."""
    if not scores:
        return None
    best = max(scores)
    for i, s in enumerate(scores):
        if s >= share * best:
            return i
    return None  # pragma: no cover - the best itself qualifies
