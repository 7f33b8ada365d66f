"""Attention, as models run it on the CPU: the estimate against the measured peak of the same step.

Each kernel choice the real run makes (the CPU flash kernel or the math path, `need_weights`, a mask,
dropout) is the replay's too; what the kernels allocate beyond their outputs is asked of them
(memory.kernel_probe), and the autograd engine's in-place gradient sums are counted as it makes them.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainspeed.memory import estimate_memory, measure_memory
from trainspeed.workloads.attention import ATTENTION_CASES as CASES


@pytest.mark.parametrize("amp", [None, "bf16"])
@pytest.mark.parametrize("name", list(CASES))
def test_attention_estimate_matches_the_measured_peak(name: str, amp: str | None) -> None:
    factory, inputs = CASES[name]
    torch.manual_seed(0)
    est = estimate_memory(factory, inputs, 8, optimizer="adamw", amp=amp)
    real = measure_memory(factory, inputs, 8, optimizer="adamw", amp=amp)
    assert est.total_bytes == pytest.approx(real.peak_bytes, rel=0.002)


def test_a_gradient_summed_from_two_uses_is_summed_in_place() -> None:
    class TwoUses(nn.Module):  # h's two gradients meet; the engine adds the second into the first
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(256, 256)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.lin(x)
            return h * 2 + torch.tanh(h)

    est = estimate_memory(TwoUses, (256,), 64, optimizer="sgd")
    real = measure_memory(TwoUses, (256,), 64, optimizer="sgd")
    assert est.total_bytes == pytest.approx(real.peak_bytes, rel=0.002)
