"""SyncCounter counts host reads as they happen, once each, and leaves torch as it found it."""

from __future__ import annotations

import numpy as np
import torch

from trainspeed.watch import SyncCounter


def test_each_kind_of_host_read_counts_once() -> None:
    x, v = torch.tensor(2.5), torch.arange(3.0)
    with SyncCounter() as c:
        x.item()
        _ = f"{x:.3f}"  # __format__ calls item() inside: still one read
        float(x)
        int(x)
        bool(x)
        v.tolist()
        repr(v)  # formatting reads many elements: one read
        np.asarray(v)
    assert c.count == 8
    assert c.by_op["item"] == 1 and c.by_op["__format__"] == 1 and c.by_op["__repr__"] == 1


def test_moves_within_the_host_are_not_reads() -> None:
    v = torch.arange(3.0)
    with SyncCounter() as c:
        v.cpu()
        v.to("cpu")
        v.to(torch.float64)
        v + 1
    assert c.count == 0


def test_values_are_untouched_and_methods_restored() -> None:
    before = {name: torch.Tensor.__dict__.get(name) for name in ("item", "__format__", "tolist")}
    x = torch.tensor(1.25)
    with SyncCounter():
        assert x.item() == 1.25 and f"{x:.2f}" == "1.25" and float(x) == 1.25
    after = {name: torch.Tensor.__dict__.get(name) for name in ("item", "__format__", "tolist")}
    assert before == after


def test_nested_counters_both_count() -> None:
    x = torch.tensor(1.0)
    with SyncCounter() as outer:
        x.item()
        with SyncCounter() as inner:
            x.item()
        x.item()
    assert (outer.count, inner.count) == (3, 1)


def test_a_training_step_makes_no_host_read() -> None:
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with SyncCounter() as c:
        loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 3, (8,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert c.count == 0


def test_a_counter_for_a_gpu_run_leaves_cpu_tensors_reads_out() -> None:
    # on a GPU run, reading a CPU tensor (a DataLoader sampler's randperm(n).tolist()) waits for nothing
    t = torch.arange(4)
    with SyncCounter() as gpu_run:
        gpu_run.count_device_reads_only()
        t.tolist()
        t.sum().item()
        f"{t[0]}"
    assert gpu_run.count == 0
    with SyncCounter() as gpu_run, SyncCounter() as cpu_run:  # a counter that counts them all wins
        gpu_run.count_device_reads_only()
        t.sum().item()
    assert cpu_run.count == 1 and gpu_run.count == 1
    with SyncCounter() as again:  # the setting belongs to its counter, not to the process
        t.sum().item()
    assert again.count == 1
