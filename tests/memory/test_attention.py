"""Attention, as models run it on the CPU: the estimate against the measured peak of the same step.

Each kernel choice the real run makes (the CPU flash kernel or the math path, `need_weights`, a mask,
dropout) is the replay's too; what the kernels allocate beyond their outputs is asked of them
(memory.kernel_probe), and the autograd engine's in-place gradient sums are counted as it makes them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainspeed.memory import estimate_memory, measure_memory
from trainspeed.workloads.attention import DecoderStack, EncoderGPT

D, HEADS, SEQ = 64, 4, 64


class SelfAttention(nn.Module):
    """A GPT block's attention written with F.scaled_dot_product_attention."""

    def __init__(self, causal: bool = True, mask: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.causal, self.mask, self.dropout = causal, mask, dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril() if self.mask else None
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal and not self.mask,
                                           dropout_p=self.dropout)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Mha(nn.Module):
    def __init__(self, need_weights: bool) -> None:
        super().__init__()
        self.attn, self.need_weights = nn.MultiheadAttention(D, HEADS, batch_first=True), need_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x, need_weights=self.need_weights)[0]


def _floats(b: int) -> torch.Tensor:
    return torch.randn(b, SEQ, D)


def _tokens(b: int) -> torch.Tensor:
    return torch.randint(0, 65, (b, SEQ))


CASES: dict[str, tuple[Callable[[], nn.Module], Callable[[int], torch.Tensor]]] = {
    "sdpa-causal": (SelfAttention, _floats),
    "sdpa-bool-mask": (lambda: SelfAttention(mask=True), _floats),
    "sdpa-dropout": (lambda: SelfAttention(dropout=0.1), _floats),
    "mha-need-weights": (lambda: Mha(True), _floats),
    "mha-no-weights": (lambda: Mha(False), _floats),
    "transformer-encoder-gpt": (EncoderGPT, _tokens),  # tied head, causal mask, dropout: the math path
    "transformer-decoder": (DecoderStack, _floats),
}


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
