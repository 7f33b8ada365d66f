"""The fewest ranks of a given memory that fit a batch per rank, for each way of sharding the step
(`trainspeed memory --fewest-ranks`).

A rank's peak is about `rest + sharded / N` at world size N: its shards (FSDP: parameters, gradients and optimizer
state; ZeRO-1: optimizer state; DDP: nothing) shrink with the world, the rest does not. One replay at a reference
world size splits the two by the breakdown at its peak, that line gives the smallest N predicted to fit, and a
replay at that N confirms it (the peak can move to another moment of the step as N changes); where it does not
fit, the next N is replayed, a few times at most.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from trainspeed.memory.estimate import Estimator
from trainspeed.memory.result import MemoryEstimate, RanksRow
from trainspeed.memory.sharded import Sharding
from trainspeed.names import SHARD_MODES

REFERENCE_WORLD = 8
"""The world size whose replay splits a rank's peak into its shards and the rest."""
MOST_RANKS = 4096
CONFIRMS = 4
"""Replays at successive world sizes before the answer is left unconfirmed."""
SHARDED_PARTS = {"ddp": (), "zero1": ("optimizer",), "fsdp": ("params", "grads", "optimizer"),
                 "fsdp-no-reshard": ("params", "grads", "optimizer")}


def _estimate(make: Callable[[Sharding], Estimator], mode: str, world: int, batch: int) -> MemoryEstimate:
    """The full estimate at `world` ranks: its breakdown splits the shards from the rest."""
    with make(Sharding(world, mode)) as est:
        return est.estimate(batch)


def _peak(make: Callable[[Sharding], Estimator], mode: str, world: int, batch: int) -> int:
    """The busiest rank's peak at `world` ranks: one replay (the estimate's second, for its per-sample line, and
    its per-layer rows are not needed here)."""
    with make(Sharding(world, mode)) as est:
        return est.peak(batch)


def fewest_ranks(make: Callable[[Sharding], Estimator], batch: int, usable: int,
                 modes: tuple[str, ...] = SHARD_MODES) -> list[RanksRow]:
    """For each mode, the fewest ranks whose busiest rank's step at `batch` peaks at or under `usable` bytes;
    `make(sharding)` builds the estimator of one rank of that world."""
    rows = []
    for mode in modes:
        ref = _estimate(make, mode, REFERENCE_WORLD, batch)
        sharded = sum(ref.breakdown.get(part, 0) for part in SHARDED_PARTS[mode]) * REFERENCE_WORLD
        rest = ref.total_bytes - sharded / REFERENCE_WORLD
        if not sharded:  # every rank holds everything: one rank fits, or none does
            fits = ref.total_bytes <= usable
            rows.append(RanksRow(mode, 1 if fits else None, ref.total_bytes if fits else None, True))
            continue
        if rest >= usable:
            rows.append(RanksRow(mode, None, None, True))
            continue
        world = max(1, math.ceil(sharded / (usable - rest)))
        found = None
        for _ in range(CONFIRMS):
            if world > MOST_RANKS:
                break
            peak = ref.total_bytes if world == REFERENCE_WORLD else _peak(make, mode, world, batch)
            if peak <= usable:
                found = RanksRow(mode, world, peak, True)
                break
            world = max(world + 1, math.ceil(world * 1.25))
        while found is not None and found.ranks is not None and found.ranks > 1:  # the line may have been high
            fewer = _peak(make, mode, found.ranks - 1, batch)
            if fewer > usable:
                break
            found = RanksRow(mode, found.ranks - 1, fewer, True)
        rows.append(found or RanksRow(mode, None, None, False))
    return rows
