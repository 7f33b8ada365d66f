"""The CPU's op/FLOP window: dispatch modes, no torch.profiler."""

from __future__ import annotations

import torch

from trainspeed.watch.profile_window import OpCounter, ProfileWindow


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
