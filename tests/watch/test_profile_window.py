"""The CPU's op/FLOP window: dispatch modes, no torch.profiler."""

from __future__ import annotations

import torch

from trainspeed.watch.profile_window import OpCounter, ProfileWindow, busy_ns


def test_op_counter_counts_dispatched_ops_and_leaves_results_alone() -> None:
    a, b = torch.randn(4, 3), torch.randn(3, 2)
    with OpCounter() as counter:
        out = torch.relu(a @ b) + 1
    assert counter.ops == 3  # mm, relu, add
    assert torch.equal(out, torch.relu(a @ b) + 1)


def test_cpu_window_counts_per_step_without_the_profiler() -> None:
    window = ProfileWindow(steps=2)
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    profiled = []
    for index in range(5):  # warm-up 1: steps 1 and 2 are counted
        (a @ b).sum()
        profiled.append(window.on_step_end(index, warmup=1, cuda=False))
    assert profiled == [False, True, True, False, False]
    assert window.ops_per_step == 2 and window.kernels_per_step is None
    assert window.flops_per_step == 2 * 8 * 16 * 4


def test_gpu_busy_time_counts_overlapping_work_once() -> None:
    # two streams overlapping 5-8, a gap 12-20, a kernel inside another
    assert busy_ns([(20, 30), (0, 8), (5, 12), (22, 25)]) == 22
    assert busy_ns([]) == 0
    assert busy_ns([(3, 4), (4, 6)]) == 3


def test_the_profiler_stops_with_cupti_detached_and_the_environment_is_put_back(monkeypatch) -> None:
    import os

    from trainspeed.watch.profile_window import cupti_detached

    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    with cupti_detached():
        assert os.environ["TEARDOWN_CUPTI"] == "1"
    assert "TEARDOWN_CUPTI" not in os.environ
    monkeypatch.setattr(torch.version, "cuda", "12.4")  # CUPTI's teardown could crash CUDA graphs there
    with cupti_detached():
        assert "TEARDOWN_CUPTI" not in os.environ
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setenv("TEARDOWN_CUPTI", "0")  # the user's own setting wins
    with cupti_detached():
        assert os.environ["TEARDOWN_CUPTI"] == "0"
    assert os.environ["TEARDOWN_CUPTI"] == "0"
