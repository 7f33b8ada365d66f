"""The tiny-op probe: a floor, so the least of its timed batches."""

from __future__ import annotations

import pytest
import torch

from trainspeed.probe.dispatch import cpu_dispatch_us, cuda_op_us, tiny_op_us


def test_the_least_batch_is_the_floor() -> None:
    # each batch's start and end: 2, 5, 3 ms for 1000 ops (a load burst in the second)
    clock = iter([0.0, 0.002, 1.0, 1.005, 2.0, 2.003])
    assert tiny_op_us(repeats=3, ops=1000, now=lambda: next(clock), waited=lambda: 0.0) == 2.0


def test_a_batchs_wait_for_a_core_is_not_the_ops_time() -> None:
    # 4, 5 and 3 ms for 1000 ops, of which the thread waited 3, 4 and 0 ms for a core: 1, 1 and 3 us an op
    clock = iter([0.0, 0.004, 1.0, 1.005, 2.0, 2.003])
    waits = iter([0.0, 0.003, 0.0, 0.004, 0.0, 0.0])  # per batch: before it (discarded), after it
    assert tiny_op_us(repeats=3, ops=1000, now=lambda: next(clock), waited=lambda: next(waits)) == pytest.approx(1.0)


def test_cpu_probe_measures_a_tiny_op() -> None:
    us = cpu_dispatch_us(repeats=3, ops=200)
    assert 0.05 < us < 1000.0  # a real op: neither free nor a millisecond


def test_cuda_probe_is_none_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cuda_op_us() is None
