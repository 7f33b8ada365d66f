"""What a DataLoader's batch costs to hand over from a worker process, and to index whole, on this machine.

A worker process makes a batch and sends it to the training process: its tensors go into shared
memory, the training process receives and rebuilds them. On a small or busy machine that handover
can cost more than making the batch did (a TensorDataset's 64 rows: a fraction of a millisecond to
fetch, a millisecond or two to hand over). `handover_ms` measures it with the run's own batch shapes
on a synthetic dataset (nothing of the user's code runs in the worker). `batched_ms` measures the
other fix for a dataset held in memory as tensors: each batch taken with one indexing op per tensor
(a BatchSampler as the sampler) instead of one fetch per item and a collate, on a TensorDataset of
zeros shaped like the user's rows (fewer of them: the probe keeps none of the user's data alive).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, TensorDataset

from trainspeed.load.probes import on_free_cores, probe_waits
from trainspeed.probe.readings import Handover

PROBE_BATCHES = 24
"""Batches timed per probe, after the first few (the worker's start, its first prefetched batches)."""
_SETTLE = 4
CHUNKS = 3
"""Runs of batches each probe times apart (a prefetching worker hands some batches over at once: one batch alone
is no measure of the rate)."""
PROBE_BYTES = 256 << 20
"""A batch larger than this is not probed (the probe keeps an item of it, and the worker a batch or two)."""


def item_like(batch: Any, batch_size: int) -> Any:
    """One item shaped like those `batch` was collated from (torch's default collate): each tensor with
    `batch_size` rows becomes a zero tensor of one row's shape; tuples, lists and dicts keep their
    structure; anything else (a list of strings, a tensor of another length) is left out. None when no
    tensor is left."""
    if isinstance(batch, torch.Tensor):
        if batch.dim() >= 1 and batch.shape[0] == batch_size and batch.layout == torch.strided:
            return torch.zeros(batch.shape[1:], dtype=batch.dtype)
        return None
    if isinstance(batch, dict):
        items = {k: item_like(v, batch_size) for k, v in batch.items()}
        kept = {k: v for k, v in items.items() if v is not None}
        return kept or None
    if isinstance(batch, (tuple, list)):
        parts = [v for v in (item_like(v, batch_size) for v in batch) if v is not None]
        return tuple(parts) if parts else None
    return None


def item_bytes(item: Any) -> int:
    if isinstance(item, torch.Tensor):
        return item.numel() * item.element_size()
    if isinstance(item, dict):
        return sum(item_bytes(v) for v in item.values())
    return sum(item_bytes(v) for v in item)


class _Same(Dataset):
    """`n` copies of one item (collate stacks them into a new batch, as the user's would be)."""

    def __init__(self, item: Any, n: int) -> None:
        self.item, self.n = item, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        return self.item


def _per_batch(loader: DataLoader, batches: int, waited: Callable[[], float] | None = None) -> tuple[float, float]:
    """(wall ms, this thread's CPU ms) per batch over `batches` batches after the first few. The wall time is read
    in CHUNKS runs of batches, each with the run-queue wait of this thread and of the loader's worker processes
    (`waited`: a test's stand-in), and taken from the runs on free cores, else from each less its waits
    (`load.probes.on_free_cores`), as the other probes take theirs: beside busy processes a worker that waits for a
    core delays every batch, a wait that is the machine's, not the handover's."""
    it = iter(loader)
    try:
        for _ in range(_SETTLE):
            next(it)
        with probe_waits(waited, native=False) as wait:
            workers = getattr(it, "_workers", [])
            for worker in workers:  # where Linux's counts are the reader (not a test's stand-in)
                wait.add_process(worker.pid)
            readings = []
            c0 = time.thread_time()
            for run in _chunks(batches):
                wait()
                t0 = time.perf_counter()
                for _ in range(run):
                    next(it)
                wall = time.perf_counter() - t0
                lost = min(wait(), wall)
                readings.append((wall / run, lost / run, wait.longest(lost, 1 + len(workers)) / run))
            cpu = time.thread_time() - c0
    finally:
        del it  # stops the worker
    return statistics.median(on_free_cores(readings)) * 1e3, cpu / batches * 1e3


def _chunks(batches: int) -> list[int]:
    """`batches` split into at most CHUNKS runs, as even as they go."""
    n = max(1, min(CHUNKS, batches))
    return [batches // n + (i < batches % n) for i in range(n)]


def handover_ms(item: Any, batch_size: int, batches: int = PROBE_BATCHES,
                waited: Callable[[], float] | None = None) -> Handover | None:
    """Per batch of `batch_size` items like `item` (see `item_like`), one worker process; None when the
    batch is too large to probe, the worker could not start, or this is not Linux. The worker is forked:
    a worker started any other way imports the main module again, which, in a script that calls
    `trainspeed.watch()` and has no `if __name__ == "__main__":` guard (it needs none without workers of
    its own), would run its training again."""
    if not sys.platform.startswith("linux") or item is None or batch_size < 1 or \
            item_bytes(item) * batch_size > PROBE_BYTES:
        return None
    loader = DataLoader(_Same(item, batch_size * (batches + _SETTLE)), batch_size=batch_size, num_workers=1,
                        multiprocessing_context="fork")
    try:
        wall, main = _per_batch(loader, batches, waited)
    except Exception:  # no worker processes here (a sandbox, a frozen app): the verdict goes on without
        return None
    return Handover(round(wall, 4), round(min(main, wall), 4))


def batched_ms(item: Any, batch_size: int, rows: int, batches: int = PROBE_BATCHES,
               waited: Callable[[], float] | None = None) -> float | None:
    """Milliseconds per batch of `batch_size` rows taken whole from a TensorDataset of tensors shaped like
    `item`'s (a tuple of row tensors, `item_like`): a DataLoader with `batch_size=None` and a BatchSampler
    over a RandomSampler as its sampler, in this process. The probe's dataset has at most `rows` rows, and
    only as many as its batches use (at most PROBE_BYTES); None when that leaves no batch to time after the
    first few."""
    if not isinstance(item, tuple) or batch_size < 1:
        return None
    row_bytes = max(1, item_bytes(item))
    rows = min(rows, batch_size * (batches + _SETTLE), PROBE_BYTES // row_bytes)
    n = min(batches, rows // batch_size - _SETTLE)
    if n < 1:
        return None
    data = TensorDataset(*(torch.zeros((rows, *t.shape), dtype=t.dtype) for t in item))
    loader = DataLoader(data, batch_size=None, sampler=BatchSampler(RandomSampler(data), batch_size, drop_last=False))
    return round(_per_batch(loader, n, waited)[0], 4)
