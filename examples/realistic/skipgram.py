"""Word embeddings trained the way word2vec tutorials write them (a realistic example, written for trainspeed, not
copied from one): skip-gram with negative sampling, two `nn.Embedding` tables (centre words and context words),
pairs drawn from a corpus around random positions, negatives drawn from the unigram distribution raised to 3/4,
Adam, the loss printed every 100 steps.

The corpus is made up from a fixed seed (nothing to download): `--tokens` draws from a Zipf distribution over
`--vocab` words.

What it really does (the counts tests/test_realistic_examples.py checks): `--steps` optimizer steps, each one
forward, one backward and one Adam step; a `.item()` read every 100 steps. With dense gradients every step makes
each table's whole gradient anew (50 000 x 128 floats, 25.6 MB) and Adam's temporaries of that size: glibc's malloc
hands such blocks back to the system when they are freed, and the next step takes them again, page by page.

    python examples/realistic/skipgram.py [--steps 300] [--vocab 50000] [--sparse] [--fused]
    MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 python examples/realistic/skipgram.py

`--sparse` gives the tables sparse gradients, updated by `torch.optim.SparseAdam` (only the rows a step touched);
`--fused` is Adam's `fused=True`.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--vocab", type=int, default=50_000)
parser.add_argument("--tokens", type=int, default=2_000_000)
parser.add_argument("--sparse", action="store_true", help="sparse gradients and torch.optim.SparseAdam")
parser.add_argument("--fused", action="store_true", help="Adam(fused=True)")
args = parser.parse_args()

torch.manual_seed(0)
V, D, B, NEG, WINDOW = args.vocab, 128, 1024, 5, 2
ranks = torch.arange(1, V + 1, dtype=torch.float)
corpus = torch.multinomial(1.0 / ranks, args.tokens, replacement=True)
noise = (1.0 / ranks) ** 0.75
noise /= noise.sum()


class SkipGram(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.centre = nn.Embedding(V, D, sparse=args.sparse)
        self.context = nn.Embedding(V, D, sparse=args.sparse)

    def forward(self, centre: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        c = self.centre(centre)  # (B, D)
        positive = (c * self.context(context)).sum(-1)  # (B,)
        negative = torch.bmm(self.context(negatives), c.unsqueeze(-1)).squeeze(-1)  # (B, NEG)
        return -(F.logsigmoid(positive).mean() + F.logsigmoid(-negative).sum(-1).mean())


model = SkipGram()
if args.sparse:
    optimizer: torch.optim.Optimizer = torch.optim.SparseAdam(model.parameters(), lr=1e-3)
else:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=args.fused or None)
start = time.perf_counter()
for step in range(args.steps):
    at = torch.randint(WINDOW, len(corpus) - WINDOW, (B,))
    offset = torch.randint(1, WINDOW + 1, (B,)) * (torch.randint(0, 2, (B,)) * 2 - 1)
    centre, context = corpus[at], corpus[at + offset]
    negatives = torch.multinomial(noise, B * NEG, replacement=True).view(B, NEG)
    loss = model(centre, context, negatives)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 100 == 0:
        print(f"step {step}: loss {loss.item():.4f}")
print(f"training time: {time.perf_counter() - start:.3f} s")
