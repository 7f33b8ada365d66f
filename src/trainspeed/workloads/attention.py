"""Models built from PyTorch's own transformer layers, as people write them from the tutorials.

Their attention runs the kernels PyTorch picks for a training step (the fast path of
nn.TransformerEncoderLayer is for inference only), so the memory estimate is checked on them
against what those kernels allocate.
"""

from __future__ import annotations

import torch
from torch import nn


class EncoderGPT(nn.Module):
    """nn.TransformerEncoder as a causal language model, its output head tied to its embedding."""

    def __init__(self, vocab: int = 65, context: int = 64, dim: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(context, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight

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
