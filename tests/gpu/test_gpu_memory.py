"""On a real CUDA device: the estimate against torch.cuda.max_memory_allocated."""

from __future__ import annotations

import pytest
import torch

from trainspeed.memory import estimate_memory, measure_memory
from trainspeed.workloads import ZOO

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
