"""The DataLoaders of a watched run: waits and checkpoints as phases, iterator starts, and torch's random state after the probes."""

from __future__ import annotations

import os
import sys
import tempfile
import time

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainspeed.watch import Watcher


class _SlowStartSampler(torch.utils.data.Sampler[int]):
    """A sampler whose every pass starts with a 20 ms wait, as a loader's workers starting would."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):  # type: ignore[no-untyped-def]
        time.sleep(0.02)
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


def test_saves_with_no_step_between_them_are_one_checkpoint() -> None:
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with tempfile.TemporaryDirectory() as folder, Watcher(warmup=1, profile_steps=0) as w:
        for step in range(12):
            loss = model(torch.randn(4, 8)).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 4 == 3:  # the model and the optimizer in two files, as a Trainer's checkpoint
                torch.save(model.state_dict(), os.path.join(folder, "model.pt"))
                torch.save(optimizer.state_dict(), os.path.join(folder, "optimizer.pt"))
    r = w.measurements()
    assert (r.checkpoints.saves, r.checkpoints.every_steps, r.checkpoints.calls) == (3, 4.0, 6)


def test_dataloader_wait_and_checkpoints_are_phases() -> None:
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with tempfile.TemporaryDirectory() as folder, Watcher(warmup=1, profile_steps=1) as w:
        for x, y in DataLoader(data, batch_size=8):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            torch.save(model.state_dict(), os.path.join(folder, "m.pt"))
    r = w.measurements()
    assert r.phases["data"].host_ms > 0 and r.phases["checkpoint"].host_ms > 0
    assert (r.checkpoints.saves, r.checkpoints.every_steps,
            r.checkpoints.calls) == (8, 1.0, 8)  # every save of the run, the warm-up's too
    assert r.loaders.each and r.loaders.each[0].num_workers == 0 and r.loaders.each[0].batch_size == 8
    # 8 batches (the 9th ask, which ended the pass, handed out none); fetched row by row from a TensorDataset; for
    # the probes after the run, an item of its shapes and the dataset's rows (not the data)
    assert (r.loaders.each[0].batches, r.loaders.each[0].dataset, r.loaders.each[0].batchable) == (8, "TensorDataset", True)
    assert r.machine.loader_workers is None  # no worker processes
    (item, rows), = w.loaders.probes.values()
    assert [(t.shape, t.dtype) for t in item] == [((8,), torch.float32), ((), torch.int64)] and rows == 64
    assert float(item[0].abs().sum()) == 0.0


def test_a_loaders_starts_are_counted_and_timed_with_their_first_batch_as_data() -> None:
    data = TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
    loader = DataLoader(data, batch_size=8, sampler=_SlowStartSampler(32))
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Watcher(warmup=2, profile_steps=1) as w:
        for _ in range(6):  # 6 epochs of 4 steps: the sums start at step 3, in the first epoch
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    r = w.measurements()
    assert r.loaders.starts == 5 and r.loaders.start_ms is not None and r.loaders.start_ms >= 20
    assert r.loaders.start_share is not None and 0 < r.loaders.start_share <= r.phases["data"].share
    # the starts' 20 ms sleeps are the data phase's time (a share of the run that depends on how busy the machine
    # keeps the tiny steps, so the time itself is checked)
    assert r.steps.mean_ms is not None and r.phases["data"].share * r.steps.mean_ms * r.steps.measured >= 5 * 20


def test_an_iterator_made_every_step_starts_and_stops_its_workers_every_step_as_data() -> None:
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=8, num_workers=1)
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(6):
            x, y = next(iter(loader))  # a new iterator, and a new worker, each step
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    r = w.measurements()
    assert r.loaders.starts == 5
    # each dropped iterator joins its worker: data, with the starts, not the next line's "other" (a worker's start
    # and join take tens of ms against a step of Linear(8, 2); the bounds leave room for a busy machine's slower steps)
    assert r.phases["data"].share > 0.5 and r.phases["other"].share < r.phases["data"].share / 4
    assert r.loaders.start_share is not None and r.loaders.start_share > 0.5 * r.phases["data"].share


class _Busy(torch.utils.data.Dataset[torch.Tensor]):
    """Items that cost a fixed amount of Python arithmetic to make."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor([float(sum(range(60_000)))])


def test_the_worker_processes_cpu_is_counted_per_batch_they_hand_over() -> None:
    loader = DataLoader(_Busy(), batch_size=4, num_workers=1)
    model = nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    with Watcher(warmup=2, profile_steps=0) as w:
        for _ in range(5):  # 5 passes of 4 batches, each pass's workers started anew
            for x in loader:
                loss = model(x).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    r = w.measurements()
    assert r.loaders.each[0].batches == 20  # the asks that ended each pass handed out nothing
    assert r.machine.loader_workers is not None and r.machine.loader_workers.batches == r.steps.measured == 18
    # the same 4 items made here, on this process's CPU clock: the worker ran at least that for each batch, and
    # its start and its side of the handover beside
    t0 = time.process_time()
    for _ in range(3):
        [_Busy()[i] for i in range(4)]
    made_ms = (time.process_time() - t0) * 1e3 / 3
    assert 0.7 * made_ms < r.machine.loader_workers.cpu_ms_per_batch < made_ms + 40


def _shuffled_loader_loop() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(2000, 64), torch.randint(0, 2, (2000,)))
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)
    for x, y in DataLoader(data, batch_size=32, shuffle=True):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_asking_for_the_result_leaves_torchs_random_state_as_unwatched(monkeypatch: pytest.MonkeyPatch) -> None:
    # the probes after the run (a DataLoader's shuffle and seeds, fresh tensors for the optimizer) draw random
    # numbers: a script that asks for the result and trains on must draw what it would have unwatched. The loader
    # probes run where the run waited on data, which a busy machine can change: here they always run
    import trainspeed.measure as report_module
    from trainspeed.doctor import Doctor

    monkeypatch.setattr(report_module, "loader_candidate", lambda result: True)
    _shuffled_loader_loop()

    unwatched = torch.rand(3)
    with Doctor() as w:
        _shuffled_loader_loop()
    report = w.result()
    assert report.context.handover is not None or sys.platform != "linux"  # the loader probes did run
    assert torch.equal(torch.rand(3), unwatched)


class _SlowTransform(nn.Module):
    """A transform that is a module, as torchvision's are: 1 ms a sample, no parameters."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.001)
        return x * 2


class _Transformed(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self) -> None:
        self.x, self.y, self.transform = torch.randn(64, 8), torch.randint(0, 2, (64,)), _SlowTransform()

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.transform(self.x[i]), self.y[i]


def test_a_module_called_by_the_dataloader_is_the_datas_not_the_forward_phase() -> None:
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Watcher(warmup=1, profile_steps=0, detail_every=1) as w:  # every step detailed: module calls hooked
        for _ in range(2):
            for x, y in DataLoader(_Transformed(), batch_size=8):
                loss = nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    r = w.measurements()
    # 8 ms of transforms a batch in the data phase; the model's forward, a tiny Linear, well under a millisecond
    assert r.phases["data"].host_ms >= 6.0 and r.phases["forward"].host_ms < 1.0
    assert r.model.batch_size == 8 and r.steps.model_calls_per_step == 1  # the model's calls, not the transform's per sample
