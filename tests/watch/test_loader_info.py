"""How a DataLoader fetches, read from its iterator: item by item, and whether its batches could be taken whole."""

from __future__ import annotations

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, IterableDataset, RandomSampler, TensorDataset

from trainspeed.watch.loader_info import loader_info

DATA = TensorDataset(torch.randn(40, 3), torch.arange(40))


class _Rows(Dataset):
    def __len__(self) -> int:
        return 40

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((3,), float(i))


class _Batched(_Rows):
    def __getitems__(self, indices: list[int]) -> list[torch.Tensor]:
        return [self[i] for i in indices]


class _Stream(IterableDataset):
    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(torch.randn(40, 3))


def test_a_tensor_dataset_batched_by_the_loader_is_fetched_row_by_row_and_batchable() -> None:
    for shuffle in (False, True):
        info = loader_info(iter(DataLoader(DATA, batch_size=8, shuffle=shuffle)))
        assert (info.dataset, info.item_by_item, info.batchable, info.batch_size) == ("TensorDataset", True, True, 8)


def test_loaders_that_could_not_take_their_batches_whole_the_same_way_are_not_batchable() -> None:
    custom = loader_info(iter(DataLoader(_Rows(), batch_size=8)))
    assert custom.item_by_item and not custom.batchable and custom.dataset == "_Rows"
    collate = loader_info(iter(DataLoader(DATA, batch_size=8, collate_fn=lambda rows: rows)))
    assert collate.item_by_item and not collate.batchable
    drawn = loader_info(iter(DataLoader(DATA, batch_size=8, sampler=RandomSampler(DATA, replacement=True))))
    assert drawn.item_by_item and not drawn.batchable


def test_loaders_that_fetch_whole_batches_are_not_item_by_item() -> None:
    whole = loader_info(iter(DataLoader(DATA, batch_size=None, sampler=BatchSampler(RandomSampler(DATA), 8, False))))
    assert not whole.item_by_item and not whole.batchable and whole.batch_size == 8
    assert not loader_info(iter(DataLoader(_Batched(), batch_size=8))).item_by_item  # __getitems__
    assert not loader_info(iter(DataLoader(_Stream(), batch_size=8))).item_by_item


def test_a_subset_fetches_as_the_dataset_under_it_does() -> None:
    # random_split gives Subsets, whose own __getitems__ fetches item by item unless the dataset under it has one
    train, _ = torch.utils.data.random_split(DATA, [30, 10])
    info = loader_info(iter(DataLoader(train, batch_size=8, shuffle=True)))
    assert (info.dataset, info.item_by_item, info.batchable) == ("Subset", True, True)
    custom = loader_info(iter(DataLoader(torch.utils.data.Subset(_Rows(), range(20)), batch_size=8)))
    assert custom.item_by_item and not custom.batchable
    assert not loader_info(iter(DataLoader(torch.utils.data.Subset(_Batched(), range(20)), batch_size=8))).item_by_item


def pad_texts(rows: list[tuple[torch.Tensor, torch.Tensor]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return rows


def test_the_scripts_own_collate_fn_is_named_and_torchs_are_not() -> None:
    assert loader_info(iter(DataLoader(DATA, batch_size=8, collate_fn=pad_texts))).collate == "pad_texts"
    assert loader_info(iter(DataLoader(DATA, batch_size=8))).collate is None  # default_collate
    assert loader_info(iter(DataLoader(DATA, batch_size=None))).collate is None  # default_convert
