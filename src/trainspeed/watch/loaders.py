"""The DataLoaders of a watched run: batches asked of each, the first batch's shapes for the probes,
and the iterators' starts and stops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainspeed.probe.loader import item_like
from trainspeed.watch.loader_info import loader_info

if TYPE_CHECKING:
    from trainspeed.watch.session import Watcher


def _loader_key(iterator: Any) -> int:
    """A DataLoader iterator's loader, as the watcher keys it: by its dataset (each epoch's new iterator is the
    same loader's)."""
    return id(getattr(iterator, "_dataset", iterator))


def loader_seen(self: Watcher, iterator: Any) -> bool:
    """A batch is asked of a DataLoader iterator; True the first time its dataset is seen (the hooks then
    hand its first batch to `loader_batch`)."""
    if self._eval_from is not None:
        self.training_again(True)
    key = _loader_key(iterator)
    if key in self.loader_batches:
        self.loader_batches[key] += 1
        return False
    self.loader_batches[key] = 1
    self.loaders[key] = loader_info(iterator)
    return True


def loader_ran_out(self: Watcher, iterator: Any) -> None:
    """An iterator's pass ran out: the batch `loader_seen` counted for that ask was none."""
    self.loader_batches[_loader_key(iterator)] -= 1


def worker_batches(self: Watcher) -> int:
    """Batches handed out so far by the loaders that have worker processes (their CPU is counted per batch)."""
    return sum(n for key, n in self.loader_batches.items() if self.loaders[key].num_workers > 0)


def loader_batch(self: Watcher, iterator: Any, batch: Any) -> None:
    """The first batch of a loader: the probes after the run copy its shapes (and, for a TensorDataset
    fetched row by row, its number of rows); nothing of the user's data is kept."""
    key = _loader_key(iterator)
    info = self.loaders[key]
    rows = len(iterator._dataset) if info.batchable else 0
    self.loader_probes[key] = (item_like(batch, info.batch_size) if info.batch_size else None, rows)


def loader_started(self: Watcher, seconds: float, stop: bool = False) -> None:
    """A DataLoader iterator was started and gave its first batch, in `seconds`; or (`stop`) one with
    workers stopped them, in `seconds`. Counted from the first measured step on, as the clock's sums are."""
    if self.clock.sums is not None:
        self.loader_starts += not stop
        self.loader_start_s += seconds
