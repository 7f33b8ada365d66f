"""Bounded statistics: a run of a million steps keeps a fixed amount of memory."""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable
from typing import Generic, TypeVar

T = TypeVar("T")

RESERVOIR_SIZE = 4096


class Reservoir(Generic[T]):
    """A uniform sample of at most `size` items from a stream (Vitter's Algorithm R), plus the count."""

    def __init__(self, size: int = RESERVOIR_SIZE, seed: int = 0) -> None:
        self.size = size
        self.seen = 0
        self.items: list[T] = []
        self._rng = random.Random(seed)  # our own RNG: the user's random state is never touched

    def add(self, item: T) -> None:
        self.seen += 1
        if len(self.items) < self.size:
            self.items.append(item)
        else:
            j = self._rng.randrange(self.seen)
            if j < self.size:
                self.items[j] = item


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
