"""Each rank's share of a batch: the seed's data parallelism, exactly.

K ranks each take 1/K of every batch (contiguous rows, sizes differing by at most one). With a
loss that averages over its rows, a rank's loss weighted by rows_r * K / rows, after DDP's
gradient average, gives exactly the gradient of the whole batch's mean loss - also when the
shares are uneven. A rank whose share is empty (a batch with fewer rows than ranks) still takes
part in the all-reduce, on one row weighted zero.
"""

from __future__ import annotations


def shard_rows(rows: int, rank: int, world: int) -> tuple[int, int]:
    """[start, stop) of this rank's rows of a `rows`-row batch."""
    base, extra = divmod(rows, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def loss_weight(rows: int, rank: int, world: int) -> float:
    """The factor on this rank's mean loss that makes DDP's averaged gradient the whole batch's."""
    start, stop = shard_rows(rows, rank, world)
    return (stop - start) * world / rows
