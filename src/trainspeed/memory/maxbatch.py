"""The largest batch whose training step fits a memory budget, with a safety margin."""

from __future__ import annotations

from collections.abc import Callable

from trainspeed.memory.estimate import largest_batch_by_model
from trainspeed.memory.result import BatchSearch, MemoryEstimate
from trainspeed.names import MEMORY_MARGIN

DEFAULT_MARGIN = MEMORY_MARGIN
"""Keep 10% of the budget free: fragmentation, the CUDA context, other tensors of the script."""


def search_max_batch(peak_at: Callable[[int], int], estimate: MemoryEstimate, budget_bytes: int,
                     margin: float = DEFAULT_MARGIN, max_evaluations: int = 24) -> BatchSearch:
    """Largest b with peak_at(b) <= budget x (1 - margin). Starts from the linear model's answer,
    then brackets and bisects with exact replays (usually two: the answer fits, one more does not)."""
    usable = int(budget_bytes * (1 - margin))
    cache: dict[int, int] = {estimate.batch_size: estimate.total_bytes}

    def peak(b: int) -> int:
        if b not in cache:
            cache[b] = peak_at(b)
        return cache[b]

    guess = max(1, largest_batch_by_model(estimate, usable))
    if peak(guess) <= usable:
        lo, hi = guess, guess + 1
        step = 1
        while peak(hi) <= usable and len(cache) < max_evaluations:
            lo, step = hi, step * 2
            hi = lo + step
    else:
        hi = guess
        lo = guess // 2
        while lo >= 1 and peak(lo) > usable and len(cache) < max_evaluations:
            hi, lo = lo, lo // 2
        if lo < 1:
            return BatchSearch(budget_bytes, margin, None, None)
    while hi - lo > 1 and len(cache) < max_evaluations:
        mid = (lo + hi) // 2
        if peak(mid) <= usable:
            lo = mid
        else:
            hi = mid
    return BatchSearch(budget_bytes, margin, lo, cache[lo])
