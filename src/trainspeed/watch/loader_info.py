"""What the doctor notes about a DataLoader from its iterator: workers, batch size, and how it fetches."""

from __future__ import annotations

from typing import Any

from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler, Subset, TensorDataset, default_collate
from torch.utils.data.dataloader import _DatasetKind

from trainspeed.watch.result import LoaderInfo


def loader_info(iterator: Any) -> LoaderInfo:
    """The LoaderInfo of a DataLoader iterator (torch's `_BaseDataLoaderIter`; attributes it lacks read as
    torch's defaults)."""
    dataset = getattr(iterator, "_dataset", None)
    inner = _under_subsets(dataset)
    batches = getattr(iterator, "_index_sampler", None)
    item_by_item = (getattr(iterator, "_dataset_kind", None) == _DatasetKind.Map
                    and bool(getattr(iterator, "_auto_collation", False))
                    and not callable(getattr(inner, "__getitems__", None)))
    return LoaderInfo(
        num_workers=int(getattr(iterator, "_num_workers", 0)),
        pin_memory=bool(getattr(iterator, "_pin_memory", False)),
        batch_size=getattr(batches, "batch_size", None),
        persistent_workers=bool(getattr(iterator, "_persistent_workers", False)),
        dataset=type(dataset).__name__ if dataset is not None else None,
        collate=_collate_name(getattr(iterator, "_collate_fn", None)),
        length=_length(iterator),
        item_by_item=item_by_item,
        batchable=item_by_item and isinstance(inner, TensorDataset) and _plain(batches)
        and getattr(iterator, "_collate_fn", None) is default_collate
        and all(t.device.type == "cpu" for t in inner.tensors),
    )


def _length(iterator: Any) -> int | None:
    """Batches in one pass (`len(loader)`), where the iterator knows it."""
    try:
        return int(len(iterator))
    except TypeError:  # an IterableDataset without __len__
        return None


def _under_subsets(dataset: Any) -> Any:
    """The dataset under any Subsets (random_split's): Subset's own `__getitems__` fetches item by item unless
    the dataset under it has one, and a list of indices given to a Subset indexes the dataset under it."""
    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    return dataset


def _plain(batches: Any) -> bool:
    """A BatchSampler over every index once, in order or shuffled: what BatchSampler(RandomSampler) (or
    SequentialSampler) with batch_size=None gives too."""
    if type(batches) is not BatchSampler:
        return False
    sampler = batches.sampler
    if type(sampler) is SequentialSampler:
        return True
    return type(sampler) is RandomSampler and not sampler.replacement and \
        sampler.num_samples == len(sampler.data_source)


def _collate_name(collate: Any) -> str | None:
    """A collate_fn's name where it is not one of torch's (default_collate, or default_convert without batching)."""
    if collate is None or getattr(collate, "__module__", "").startswith("torch."):
        return None
    return getattr(collate, "__qualname__", None) or type(collate).__name__
