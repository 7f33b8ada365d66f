"""The largest-batch searches, on recorded or synthetic peaks (no real memory needed)."""

from __future__ import annotations

import pytest
import torch

from trainspeed.memory.allocations import allocation_peak
from trainspeed.memory.maxbatch import search_max_batch
from trainspeed.memory.measure import confirm_max_batch
from trainspeed.memory.result import MeasuredPeak, MemoryEstimate


def _estimate(fixed: int, per_sample: float, batch: int = 8) -> MemoryEstimate:
    return MemoryEstimate(total_bytes=int(fixed + batch * per_sample), fixed_bytes=fixed, per_sample_bytes=per_sample,
                          batch_size=batch, breakdown={}, layers=[], peak_phase="backward", device="cpu",
                          optimizer="adam", amp=None, checkpointing=False, param_count=0)


def test_exact_linear_peaks() -> None:
    peak = lambda b: 1000 + 100 * b  # noqa: E731
    s = search_max_batch(peak, _estimate(1000, 100), budget_bytes=10_000, margin=0.1)
    # usable 9000 -> 1000 + 100 b <= 9000 -> b = 80
    assert s.max_batch == 80 and s.predicted_bytes == 9000


def test_steps_down_when_the_linear_model_is_optimistic() -> None:
    peak = lambda b: 1000 + 100 * b + (b // 10) * 50  # noqa: E731 - grows faster than the fit says
    s = search_max_batch(peak, _estimate(1000, 100), budget_bytes=10_000, margin=0.1)
    assert peak(s.max_batch) <= 9000 < peak(s.max_batch + 1)


def test_nothing_fits() -> None:
    s = search_max_batch(lambda b: 10**9, _estimate(10**9, 1), budget_bytes=1000, margin=0.1)
    assert s.max_batch is None


def test_confirm_with_out_of_memory_above_a_threshold() -> None:
    calls: list[int] = []

    def measure(b: int) -> MeasuredPeak:
        calls.append(b)
        if b > 120:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB")
        return MeasuredPeak(1000 + 100 * b, "cuda:0", "test")

    best, trials, confirmed = confirm_max_batch(measure, start=150, usable_bytes=9000, per_sample_bytes=100)
    assert best == 80 and confirmed
    assert len(trials) <= 6


def test_confirm_steps_up_when_the_estimate_was_pessimistic() -> None:
    best, trials, confirmed = confirm_max_batch(lambda b: MeasuredPeak(1000 + 90 * b, "cpu", "test"),
                                                start=80, usable_bytes=9000, per_sample_bytes=100)
    assert best == 88 and confirmed and len(trials) <= 4


def test_confirm_reraises_errors_that_are_not_out_of_memory() -> None:
    def broken(b: int) -> MeasuredPeak:
        raise ValueError("shape mismatch")

    with pytest.raises(ValueError):
        confirm_max_batch(broken, 10, 1000, 10.0)


def test_allocation_peak_is_taken_from_zero_in_time_order() -> None:
    assert allocation_peak([(3, -50), (1, 100), (2, 30), (4, 10)]) == 130
