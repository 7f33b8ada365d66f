"""Built-in models of different kinds, to check memory rules on more than one shape of network.

Each entry names a factory and the per-sample input it takes; all are small enough to train a
step on a laptop CPU, and each exercises one thing estimators get wrong (BatchNorm buffers,
weight tying, recurrent kernels, in-place ops, a layer used twice, PyTorch's own attention layers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from trainspeed.workloads.attention import DecoderStack, EncoderGPT
from trainspeed.workloads.iris import IrisMLP


class DigitsCNN(nn.Module):
    """For scikit-learn's 8x8 digits: two 3x3 convolutions, a pool, a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, 1, 8, 8)
        x = F.relu(self.conv1(x))  # (N, 16, 8, 8)
        x = self.pool(F.relu(self.conv2(x)))  # (N, 32, 4, 4)
        return self.fc(x.flatten(1))  # (N, 10)


class BasicBlock(nn.Module):
    """ResNet's basic block: conv-BN-ReLU-conv-BN plus the shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetCNN(nn.Module):
    """A small ResNet for 3x32x32 images (CIFAR-sized)."""

    def __init__(self, width: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.layers = nn.Sequential(
            BasicBlock(width, width, 1), BasicBlock(width, 2 * width, 2), BasicBlock(2 * width, 4 * width, 2),
        )
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, 3, 32, 32)
        x = self.layers(self.stem(x))  # (N, 4w, 8, 8)
        return self.head(x.mean(dim=(2, 3)))  # (N, classes)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)  # 3 x (B, T, C)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))  # (B, H, T, D)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A GPT-style decoder: token and position embeddings, pre-norm blocks, a tied output head."""

    def __init__(self, vocab: int = 512, context: int = 64, dim: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.register_parameter("weight", cast(nn.Parameter, self.tok.weight))  # weight tying: one tensor, counted once

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (B, T) int64
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))  # (B, T, vocab)


class RecurrentNet(nn.Module):
    """An LSTM followed by a GRU over a sequence of feature vectors; classifies the last step."""

    def __init__(self, features: int = 16, hidden: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, batch_first=True)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, T, F)
        y, _ = self.lstm(x)  # (N, T, H)
        y, _ = self.gru(y)  # (N, T, H)
        return self.fc(y[:, -1])  # (N, classes)


class InplaceMLP(nn.Module):
    """An MLP whose ReLUs work in place (their outputs share the input's storage)."""

    def __init__(self, features: int = 256, hidden: int = 512, classes: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(features, hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class SharedLayerNet(nn.Module):
    """Applies the same hidden layer twice: one set of weights, two sets of activations."""

    def __init__(self, features: int = 128, hidden: int = 256, classes: int = 10) -> None:
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.shared = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.inp(x))
        x = torch.tanh(self.shared(x))
        x = torch.tanh(self.shared(x))  # the same module, called again
        return self.out(x)


@dataclass(frozen=True)
class ZooEntry:
    """A built-in model and the per-sample input it takes."""

    factory: Callable[[], nn.Module]
    input_shape: tuple[int, ...]
    input_dtype: torch.dtype = torch.float32
    input_high: int | None = None
    """For integer inputs (token ids): values are drawn from [0, input_high)."""
    description: str = ""


ZOO: dict[str, ZooEntry] = {
    "iris-mlp": ZooEntry(IrisMLP, (4,), description="the seed's MLP 4-10-3"),
    "digits-cnn": ZooEntry(DigitsCNN, (1, 8, 8), description="two convolutions for 8x8 digits"),
    "resnet-cnn": ZooEntry(ResNetCNN, (3, 32, 32), description="a small ResNet with BatchNorm"),
    "gpt": ZooEntry(TinyGPT, (64,), torch.int64, 512, description="a GPT-style decoder with weight tying"),
    "rnn": ZooEntry(RecurrentNet, (32, 16), description="LSTM then GRU over 32 steps"),
    "inplace-mlp": ZooEntry(InplaceMLP, (256,), description="an MLP with in-place ReLU"),
    "shared-layer": ZooEntry(SharedLayerNet, (128,), description="one Linear used twice"),
    "encoder-gpt": ZooEntry(EncoderGPT, (64,), torch.int64, 65,
                            description="nn.TransformerEncoder as a causal LM, head tied to embedding"),
    "decoder-stack": ZooEntry(DecoderStack, (64, 64), description="nn.TransformerDecoder, self- and cross-attention"),
}
