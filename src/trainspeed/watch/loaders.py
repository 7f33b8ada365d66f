"""The DataLoaders of a watched run: batches asked of each, the first batch's shapes for the probes, and the
iterators' starts and stops.

`LoaderTracker` owns all of it, keyed by each loader's dataset (each epoch's new iterator is the same loader's).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trainspeed.probe.loader import item_like
from trainspeed.watch.loader_info import loader_info
from trainspeed.watch.result import LoaderInfo, Loaders


def _loader_key(iterator: Any) -> int:
    """A DataLoader iterator's loader, as the tracker keys it: by its dataset."""
    return id(getattr(iterator, "_dataset", iterator))


class LoaderTracker:
    def __init__(self) -> None:
        self.infos: dict[int, LoaderInfo] = {}
        self.batches: dict[int, int] = {}
        """Batches asked of each loader (by the id of its dataset), warm-up included."""
        self.evaluation_batches: dict[int, int] = {}
        """Of them, those asked during an evaluation."""
        self.probes: dict[int, tuple[Any, int]] = {}
        """(an item shaped like the loader's, the rows of its TensorDataset when it is `batchable`, else 0) per
        loader."""
        self.restart()

    def restart(self) -> None:
        """The measured steps start over (`Watcher._measure_anew`): their starts are counted anew."""
        self.starts = 0
        self.start_s = 0.0
        """DataLoader iterators started during the measured steps, and the seconds those starts took with their
        first batch, and the stops of their workers (`started`)."""

    def seen(self, iterator: Any, evaluating: bool = False) -> bool:
        """A batch is asked of a DataLoader iterator (during an evaluation: `evaluating`); True the first time its
        dataset is seen (the hooks then hand its first batch to `first_batch`)."""
        key = _loader_key(iterator)
        if evaluating:
            self.evaluation_batches[key] = self.evaluation_batches.get(key, 0) + 1
        if key in self.batches:
            self.batches[key] += 1
            return False
        self.batches[key] = 1
        self.infos[key] = loader_info(iterator)
        return True

    def ran_out(self, iterator: Any) -> None:
        """An iterator's pass ran out: the batch `seen` counted for that ask was none."""
        self.batches[_loader_key(iterator)] -= 1

    def worker_batches(self) -> int:
        """Batches handed out so far by the loaders that have worker processes (their CPU is counted per batch)."""
        return sum(n for key, n in self.batches.items() if self.infos[key].num_workers > 0)

    def first_batch(self, iterator: Any, batch: Any) -> None:
        """The first batch of a loader: the probes after the run copy its shapes (and, for a TensorDataset
        fetched row by row, its number of rows); nothing of the user's data is kept."""
        key = _loader_key(iterator)
        info = self.infos[key]
        rows = len(iterator._dataset) if info.batchable else 0
        self.probes[key] = (item_like(batch, info.batch_size) if info.batch_size else None, rows)

    def started(self, seconds: float, measuring: bool, stop: bool = False) -> None:
        """A DataLoader iterator was started and gave its first batch, in `seconds`; or (`stop`) one with
        workers stopped them, in `seconds`. Counted from the first measured step on (`measuring`)."""
        if measuring:
            self.starts += not stop
            self.start_s += seconds

    def probe_items(self) -> list[tuple[Any, int]]:
        """(item, rows) of each loader in the order seen, for the doctor's probes ((None, 0) where none was kept)."""
        return [self.probes.get(key, (None, 0)) for key in self.infos]

    def part(self, summed_wall: float | None) -> Loaders:
        """The loaders, and their starts over the measured run's `summed_wall` seconds."""
        return Loaders(
            [dataclasses.replace(info, batches=self.batches[key], evaluation_batches=self.evaluation_batches.get(key, 0))
             for key, info in self.infos.items()],
            self.starts, self.start_s / summed_wall if summed_wall else None,
            self.start_s * 1e3 / self.starts if self.starts else None)
