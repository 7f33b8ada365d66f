"""On a real CUDA device: the estimate against torch.cuda.max_memory_allocated."""

from __future__ import annotations

import pytest
import torch

from trainspeed.memory import estimate_memory, measure_memory
from trainspeed.workloads import ZOO
from trainspeed.workloads.attention import ATTENTION_CASES

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", ["inplace-mlp", "gpt"])
def test_estimate_matches_max_memory_allocated(name: str) -> None:
    e = ZOO[name]

    def make(b: int) -> torch.Tensor:
        if e.input_dtype.is_floating_point:
            return torch.randn(b, *e.input_shape)
        return torch.randint(0, e.input_high or 2, (b, *e.input_shape))

    est = estimate_memory(e.factory, make, 16, optimizer="adam", device="cuda")
    real = measure_memory(e.factory, make, 16, optimizer="adam", device="cuda")
    assert est.total_bytes == pytest.approx(real.peak_bytes, rel=0.05)


def test_workspaces_are_read_off_the_device() -> None:
    from trainspeed.memory.cuda_workspaces import measure_workspaces

    ws = measure_workspaces(torch.device("cuda"))
    assert ws.host_thread > 0 and ws.engine_thread > 0 and ws.source.startswith("measured on")


@pytest.mark.parametrize("amp", [None, "bf16"])
@pytest.mark.parametrize("name", list(ATTENTION_CASES))
def test_attention_estimate_matches_the_gpus_kernels(name: str, amp: str | None) -> None:
    """Each way of calling attention, replayed with the kernel CUDA picks (flash, memory-efficient, math) and
    that kernel's own buffers asked of it, against the measured peak: the goal is 2%."""
    factory, inputs = ATTENTION_CASES[name]
    torch.manual_seed(0)
    est = estimate_memory(factory, inputs, 8, optimizer="adamw", amp=amp, device="cuda")
    real = measure_memory(factory, inputs, 8, optimizer="adamw", amp=amp, device="cuda")
    assert est.total_bytes == pytest.approx(real.peak_bytes, rel=0.02)
