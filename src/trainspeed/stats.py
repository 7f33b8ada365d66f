"""Plain statistics shared by every layer: medians, quantiles, and the bootstrap's resampled medians.

Pure functions over lists of floats, so they are tested without running anything.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
"""Resamples of every bootstrap interval the project reports (a sweep's points, `trainspeed compare`)."""


def quantile(values: Iterable[float], q: float) -> float | None:
    """The q-quantile (0..1) by linear interpolation; None for no values."""
    data = sorted(values)
    if not data:
        return None
    if len(data) == 1:
        return data[0]
    pos = q * (len(data) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def median(values: Iterable[float]) -> float | None:
    data = list(values)
    return statistics.median(data) if data else None


def resampled_medians(values: Iterable[float], rng: np.random.Generator,
                      resamples: int = BOOTSTRAP_RESAMPLES) -> np.ndarray:
    """The medians of `resamples` bootstrap resamples of `values` (drawn with replacement, as many as there are)."""
    data = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    return np.median(rng.choice(data, size=(resamples, data.size), replace=True), axis=1)
