"""The cuBLAS workspaces a CUDA step holds: the model's sizes, and which phases bring which."""

from __future__ import annotations

import torch
from torch import nn

from trainspeed.memory import estimate_memory
from trainspeed.memory.cuda_workspaces import (
    Workspaces,
    cublas_workspace_bytes,
    cublaslt_workspace_bytes,
    modelled_workspaces,
)

MIB = 2**20


def test_cublas_workspace_follows_pytorch_defaults_and_the_env() -> None:
    assert cublas_workspace_bytes((9, 0), config="") == 32 * MIB
    assert cublas_workspace_bytes((8, 0), config="") == 8 * MIB + 128 * 2**10
    assert cublas_workspace_bytes(None, config=":4096:8") == 32 * MIB
    assert cublas_workspace_bytes(None, config=":16:8") == 128 * 2**10
    assert cublaslt_workspace_bytes("") == MIB and cublaslt_workspace_bytes("4096") == 4 * MIB


def test_backward_runs_on_a_thread_of_its_own_with_its_own_workspace() -> None:
    # as read off an H100 with torch 2.11 (CUDA 13): 32 MiB for each thread, 1 MiB for cuBLASLt
    ws = Workspaces(32 * MIB, MIB, 32 * MIB, "measured")
    linear_step = {"forward": {"aten.addmm.default", "aten.relu.default"}, "backward": {"aten.mm.default"},
                   "optimizer": {"aten._foreach_add_.List"}}
    assert ws.for_step(linear_step) == 65 * MIB
    unbiased = {"forward": {"aten.mm.default"}, "backward": {"aten.mm.default"}}
    assert ws.for_step(unbiased) == 64 * MIB
    frozen_matmuls = {"forward": {"aten.mm.default"}, "backward": {"aten.mul.Tensor"}}
    assert ws.for_step(frozen_matmuls) == 32 * MIB
    assert ws.for_step({"forward": {"aten.convolution.default"}, "backward": {"aten.convolution_backward.default"}}) == 0


def test_a_cuda_estimate_made_without_cuda_counts_both_threads_workspaces(monkeypatch) -> None:
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.delenv("CUBLASLT_WORKSPACE_SIZE", raising=False)
    est = estimate_memory(lambda: nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)), (8,), 4,
                          optimizer="sgd", device="cuda")
    ws = modelled_workspaces(None)
    assert ws.host_thread == ws.engine_thread == cublas_workspace_bytes(None, config="")
    assert est.breakdown["workspace"] == ws.host_thread + ws.biased + ws.engine_thread
    assert not torch.cuda.is_available()  # the conftest hides any GPU from these tests


def test_the_workspaces_are_read_outside_the_fake_mode(monkeypatch) -> None:
    # on a GPU they are read off the real allocator: under the replay's fake mode nothing would be
    # allocated, and the reading was -16 KiB (seen on an H100, 2026-11-22)
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    from trainspeed.memory import estimate as estimate_module

    modes = []

    def fake_reading(device: torch.device, capability: tuple[int, int] | None) -> Workspaces:
        modes.append(_get_current_dispatch_mode())
        return Workspaces(3 * MIB, MIB, 5 * MIB, "measured")

    monkeypatch.setattr(estimate_module, "step_workspaces", fake_reading)
    est = estimate_memory(lambda: nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)), (8,), 4,
                          optimizer="sgd", device="cuda")
    assert modes == [None]
    assert est.breakdown["workspace"] == 9 * MIB
