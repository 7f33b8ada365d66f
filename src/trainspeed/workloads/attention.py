"""Models built from PyTorch's own transformer layers, as people write them from the tutorials.

Their attention runs the kernels PyTorch picks for a training step (the fast path of
nn.TransformerEncoderLayer is for inference only), so the memory estimate is checked on them
against what those kernels allocate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

D, HEADS, SEQ = 64, 4, 64


class EncoderGPT(nn.Module):
    """nn.TransformerEncoder as a causal language model, its output head tied to its embedding."""

    def __init__(self, vocab: int = 65, context: int = 64, dim: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(context, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.register_parameter("weight", cast(nn.Parameter, self.emb.weight))  # weight tying: one tensor

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (B, T) int64
        t = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        return self.head(self.blocks(self.emb(idx) + self.pos[:t], mask=mask, is_causal=True))  # (B, T, vocab)


class DecoderStack(nn.Module):
    """nn.TransformerDecoder attending to its own input as memory: self- and cross-attention."""

    def __init__(self, dim: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.blocks = nn.TransformerDecoder(nn.TransformerDecoderLayer(dim, heads, 4 * dim, batch_first=True), layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, dim)
        return self.blocks(x, x)


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
    """nn.MultiheadAttention as self-attention, its weights returned or not."""

    def __init__(self, need_weights: bool) -> None:
        super().__init__()
        self.attn, self.need_weights = nn.MultiheadAttention(D, HEADS, batch_first=True), need_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x, need_weights=self.need_weights)[0]


def floats(b: int) -> torch.Tensor:
    return torch.randn(b, SEQ, D)


def tokens(b: int) -> torch.Tensor:
    return torch.randint(0, 65, (b, SEQ))


ATTENTION_CASES: dict[str, tuple[Callable[[], nn.Module], Callable[[int], torch.Tensor]]] = {
    "sdpa-causal": (SelfAttention, floats),
    "sdpa-bool-mask": (lambda: SelfAttention(mask=True), floats),
    "sdpa-dropout": (lambda: SelfAttention(dropout=0.1), floats),
    "mha-need-weights": (lambda: Mha(True), floats),
    "mha-no-weights": (lambda: Mha(False), floats),
    "transformer-encoder-gpt": (EncoderGPT, tokens),  # tied head, causal mask, dropout
    "transformer-decoder": (DecoderStack, floats),
}
"""Each way models call attention (each SDPA kernel choice: causal, a boolean mask, dropout; nn.MultiheadAttention
with and without its weights; PyTorch's encoder and decoder stacks in training): (model factory, batch -> input)."""
