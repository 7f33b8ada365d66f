"""The matmul probes: a rate at torch's threads, and at two thread counts in turn."""

from __future__ import annotations

import torch

from trainspeed.probe.matmul import cpu_matmul_gflops, thread_gflops


def test_a_matmul_rate_is_its_flops_over_its_time() -> None:
    ticks = iter(range(100))
    # a fake clock: every product block takes one "second"
    rate = cpu_matmul_gflops(n=8, repeats=3, inner=5, now=lambda: float(next(ticks)))
    assert rate == 2 * 8**3 * 5 / 1e9


def test_thread_rates_run_at_each_count_and_put_the_threads_back() -> None:
    before = torch.get_num_threads()
    slow, fast = thread_gflops(64, (2, 1), rounds=2)
    assert slow > 0 and fast > 0
    assert torch.get_num_threads() == before


def test_float32_and_another_dtype_are_measured_in_turn(monkeypatch) -> None:
    import trainspeed.probe.matmul as matmul

    calls: list[torch.dtype] = []
    monkeypatch.setattr(matmul, "cpu_matmul_gflops", lambda dtype=torch.float32, **kw: calls.append(dtype) or
                        (100.0 if dtype == torch.float32 else 40.0) + len(calls))
    reference, rates = matmul.paired_dtype_gflops(["float64"], rounds=3)
    assert calls == [torch.float32, torch.float64] * 3  # in turn, not one then the other
    assert reference == 100.0 + 3 and rates == {"float64": 40.0 + 4}  # each one's median
