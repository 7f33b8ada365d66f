"""Stack samples taken inside the DataLoader's worker processes while they make batches."""

from __future__ import annotations

import os
import tempfile

import torch
import torch.utils.data._utils.worker as worker_module
from torch import nn
from torch.utils.data import DataLoader, Dataset

from trainspeed.watch import Watcher
from trainspeed.watch.sampler import data_site
from trainspeed.watch.worker_sampler import worker_site


class _Arithmetic(Dataset[torch.Tensor]):
    """Items made by a line of pure Python arithmetic (about 3 ms each)."""

    def __len__(self) -> int:
        return 32

    def __getitem__(self, i: int) -> torch.Tensor:
        total = sum(k * k for k in range(150_000))  # the line the workers' samples name
        return torch.tensor([float(total % 7)])


def _train(loader: DataLoader[torch.Tensor]) -> Watcher:
    model = nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(3):
            for x in loader:
                loss = model(x).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    return w


def test_the_workers_own_samples_name_the_line_that_makes_their_items() -> None:
    folders = set(os.listdir(tempfile.gettempdir()))
    original = worker_module._worker_loop
    r = _train(DataLoader(_Arithmetic(), batch_size=4, num_workers=1)).measurements()
    top = r.sites.workers[0]
    assert top.where.endswith(f"test_worker_sampler.py:{_line_of('the line the workers')}")
    assert top.code.startswith("total = sum(k * k") and top.share_of_data > 0.5 and top.samples >= 10
    # torch's loop back in place, and no folder of tallies left behind
    assert worker_module._worker_loop is original
    assert not {f for f in set(os.listdir(tempfile.gettempdir())) - folders if f.startswith("trainspeed-workers-")}


def test_a_spawned_worker_runs_torchs_loop_unwatched() -> None:
    loader = DataLoader(_Arithmetic(), batch_size=8, num_workers=1, multiprocessing_context="spawn")
    r = _train(loader).measurements()
    assert r.steps.seen == 12 and r.sites.workers == []


def test_a_sample_outside_a_fetch_names_nothing() -> None:
    import sys

    assert worker_site(sys._getframe(), data_site) is None  # waiting for indices or handing a batch over: no fetcher


def _line_of(text: str) -> int:
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, line in enumerate(f, 1) if text in line and "def " not in line and "_line_of" not in line)
