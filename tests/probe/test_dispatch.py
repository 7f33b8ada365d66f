"""The tiny-op probe: a floor, so the least of its timed batches."""

from __future__ import annotations

import pytest
import torch

from trainspeed.probe.dispatch import cpu_dispatch_us, cuda_op_us, tiny_op_us


def test_the_least_batch_is_the_floor() -> None:
    # each batch's start and end: 2, 5, 3 ms for 1000 ops (a load burst in the second)
    clock = iter([0.0, 0.002, 1.0, 1.005, 2.0, 2.003])
    assert tiny_op_us(repeats=3, ops=1000, now=lambda: next(clock)) == 2.0


def test_cpu_probe_measures_a_tiny_op() -> None:
    us = cpu_dispatch_us(repeats=3, ops=200)
    assert 0.05 < us < 1000.0  # a real op: neither free nor a millisecond


def test_cuda_probe_is_none_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cuda_op_us() is None
