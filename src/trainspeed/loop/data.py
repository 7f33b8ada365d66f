"""What `fit` trains on: tensors kept on the device when they fit, else a DataLoader's batches.

Tensors (a tuple `(inputs..., target)`, a TensorDataset, or a DataLoader over one with plain
sequential or random sampling) are moved to the device once and batched there: a shuffled
index per epoch, one gather per batch, no DataLoader and no host→device copy per step. Anything
else (a Dataset with per-item work, a custom collate) keeps its DataLoader, with pinned memory
and non-blocking copies.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler, TensorDataset
from torch.utils.data.dataloader import default_collate

from trainspeed.errors import FitError

Batch = tuple[tuple[torch.Tensor, ...], torch.Tensor]
"""(model inputs, target)."""
Group = list[Batch]
"""The micro-batches of one optimizer step (one, unless accumulating)."""
RESIDENT_SHARE = 0.5
"""Data stays on a CUDA device only if it takes at most this share of the free memory."""


def describe(t: torch.Tensor) -> str:
    return f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} on {t.device}"


@dataclass
class TrainData:
    """Batches for each epoch; `full` batches all have the same shape (what graphs need)."""

    tensors: tuple[torch.Tensor, ...] | None
    """Resident tensors (inputs..., target), or None when a DataLoader supplies batches."""
    loader: DataLoader | None
    rows: int
    batch_size: int
    shuffle: bool
    device: torch.device
    generator: torch.Generator | None = None
    """Draws each epoch's shuffle (every rank of a data-parallel job draws the same order); None: torch's."""
    sampler: object = None
    """A DistributedSampler under torchrun: told each epoch's number so its shuffle changes."""
    epochs_started: int = 0

    @property
    def batches_per_epoch(self) -> int:
        if self.loader is not None:
            return len(self.loader)
        return -(-self.rows // self.batch_size)

    @property
    def full_batch(self) -> bool:
        """One batch of every row, in order: the same tensors every step."""
        return self.tensors is not None and self.batch_size >= self.rows and not self.shuffle

    def epoch(self) -> Iterator[tuple[Batch, bool]]:
        """This epoch's batches, each with whether it has the full batch size."""
        self.epochs_started += 1
        if self.loader is not None:
            if hasattr(self.sampler, "set_epoch"):
                self.sampler.set_epoch(self.epochs_started - 1)
            for item in self.loader:
                batch = _split(item)
                moved = tuple(t.to(self.device, non_blocking=True) for t in (*batch[0], batch[1]))
                yield (moved[:-1], moved[-1]), moved[-1].shape[0] == self.batch_size
            return
        assert self.tensors is not None
        if self.full_batch:
            yield (self.tensors[:-1], self.tensors[-1]), True
            return
        order = torch.randperm(self.rows, device=self.device, generator=self.generator) if self.shuffle else None
        for start in range(0, self.rows, self.batch_size):
            stop = min(start + self.batch_size, self.rows)
            if order is None:
                parts = tuple(t[start:stop] for t in self.tensors)
            else:
                index = order[start:stop]
                parts = tuple(t.index_select(0, index) for t in self.tensors)
            yield (parts[:-1], parts[-1]), stop - start == self.batch_size


def _split(item: object) -> Batch:
    if isinstance(item, (tuple, list)) and len(item) >= 2 and all(isinstance(t, torch.Tensor) for t in item):
        return tuple(item[:-1]), item[-1]
    raise FitError("each batch must be a tuple (inputs..., target) of tensors; got "
                   f"{type(item).__name__}" + (f" of {len(item)}" if isinstance(item, (tuple, list)) else ""))


def _check_tensors(tensors: Sequence[object]) -> tuple[torch.Tensor, ...]:
    if len(tensors) < 2:
        raise FitError(f"data needs at least (inputs, target); got {len(tensors)} item(s)")
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise FitError(f"data[{i}] is a {type(t).__name__}, not a tensor")
        if t.dim() == 0:
            raise FitError(f"data[{i}] is a 0-d tensor; its first dimension must index the samples")
    rows = [t.shape[0] for t in tensors]  # type: ignore[attr-defined]  # checked tensors above
    if len(set(rows)) > 1:
        names = ["inputs" if len(tensors) == 2 else f"inputs[{i}]" for i in range(len(tensors) - 1)] + ["target"]
        shown = ", ".join(f"{n} has {r} rows" for n, r in zip(names, rows))
        raise FitError(f"data tensors disagree on the number of samples: {shown}")
    if rows[0] == 0:
        raise FitError("data has no samples")
    devices = {t.device for t in tensors}  # type: ignore[attr-defined]  # checked tensors above
    if len(devices) > 1:
        shown = ", ".join(f"data[{i}] {describe(t)}" for i, t in enumerate(tensors))  # type: ignore[arg-type]
        raise FitError(f"data tensors are on different devices: {shown}")
    return tuple(tensors)  # type: ignore[arg-type]


def _fits(tensors: Sequence[torch.Tensor], device: torch.device) -> bool:
    if device.type != "cuda":
        return True  # already in host memory
    need = sum(t.numel() * t.element_size() for t in tensors if t.device != device)
    free, _ = torch.cuda.mem_get_info(device)
    return need <= RESIDENT_SHARE * free


def _loader_tensors(loader: DataLoader) -> tuple[torch.Tensor, ...] | None:
    """The tensors behind a loader when batching them ourselves gives the same batches' contents."""
    if not isinstance(loader.dataset, TensorDataset) or loader.collate_fn is not default_collate:
        return None
    if not isinstance(loader.sampler, (SequentialSampler, RandomSampler)) or loader.batch_size is None:
        return None
    sampler = loader.sampler
    if isinstance(sampler, RandomSampler) and (sampler.replacement or sampler.num_samples != len(loader.dataset)):
        return None
    return tuple(loader.dataset.tensors)


def resolve_data(data: object, batch_size: int | None, shuffle: bool | None, device: torch.device,
                 pin: bool) -> TrainData:
    """Check `data` and lay it out for `device`; errors name the problem."""
    if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1):
        raise FitError(f"batch_size must be a positive integer or None (the whole data set); got {batch_size!r}")
    loader: DataLoader | None = None
    if isinstance(data, DataLoader):
        if batch_size is not None and batch_size != data.batch_size:
            raise FitError(f"batch_size={batch_size} disagrees with the DataLoader's batch_size={data.batch_size}; "
                           "leave batch_size out, or give the tensors instead of a loader")
        tensors = _loader_tensors(data)
        if tensors is None:
            loader = data
        else:
            batch_size = data.batch_size
            shuffle = isinstance(data.sampler, RandomSampler) if shuffle is None else shuffle
    elif isinstance(data, TensorDataset):
        tensors = tuple(data.tensors)
    elif isinstance(data, (tuple, list)):
        tensors = _check_tensors(data)
    elif isinstance(data, Dataset):
        if batch_size is None:
            raise FitError("a Dataset needs a batch_size (or pass a DataLoader)")
        loader = DataLoader(data, batch_size=batch_size, shuffle=shuffle is not False, pin_memory=pin)
        tensors = None
    else:
        raise FitError(f"data must be a tuple of tensors (inputs..., target), a Dataset or a DataLoader; "
                       f"got {type(data).__name__}")

    if loader is not None:
        size = loader.batch_size
        if size is None:
            raise FitError("the DataLoader has batch_size=None (a batch_sampler); fit needs a fixed batch size")
        return TrainData(None, loader, len(loader.dataset), size, bool(shuffle), device)  # type: ignore[arg-type]

    assert tensors is not None  # every branch without a loader set them
    tensors = _check_tensors(tensors)
    rows = tensors[0].shape[0]
    if not _fits(tensors, device):
        dataset = TensorDataset(*(t.cpu() for t in tensors))
        size = batch_size or rows
        return TrainData(None, DataLoader(dataset, batch_size=size, shuffle=bool(shuffle), pin_memory=pin),
                         rows, size, bool(shuffle), device)
    size = min(batch_size or rows, rows)
    if shuffle is None:
        shuffle = size < rows  # minibatch SGD shuffles; one full batch needs no order
    moved = tuple(t.to(device) for t in tensors)
    return TrainData(moved, None, rows, size, shuffle, device)
