"""A character-level GPT trained the way popular small-GPT training programs do it (a realistic example, written
for trainspeed, not copied from one): the text encoded once into a uint16 file, batches cut from a numpy memmap
of it with offsets drawn by `torch.randint`, an `estimate_loss()` over both splits every `--eval-interval`
steps (`model.eval()` once, the splits under `torch.no_grad()`, `model.train()` once), AdamW with a warm-up and
cosine learning rate, the loss printed every `--log-interval` steps.

What it really does, per run of N steps with evaluation interval E and E_I evaluation batches (the counts
tests/examples/test_realistic.py checks the doctor's report against):
- N optimizer steps; an evaluation before step 0, E, 2E, ... (ceil(N / E) of them), each 2 x E_I forward passes;
- per training step, 2 x batch index tensors read by numpy's slicing (`data[i:i + block]` reads `i` and
  `i + block`): reads of CPU tensors, no synchronisation on any device; one `loss.item()` every log interval.

    python examples/realistic/char_gpt.py [--max-iters 100] [--eval-interval 10] [--eval-iters 5]
"""

from __future__ import annotations

import argparse
import atexit
import codecs
import math
import os
import shutil
import tempfile
import this
import time

import numpy as np
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--max-iters", type=int, default=100)
parser.add_argument("--eval-interval", type=int, default=10)
parser.add_argument("--eval-iters", type=int, default=5)
parser.add_argument("--log-interval", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=12)
parser.add_argument("--block-size", type=int, default=32)
args = parser.parse_args()

# -- data: the text encoded once into train.bin / val.bin, read back through a memmap ----------------------------
text = codecs.decode(this.s, "rot13") * 40  # the Zen of Python, repeated: nothing to download
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
ids = np.array([stoi[c] for c in text], dtype=np.uint16)
data_dir = tempfile.mkdtemp(prefix="char_gpt_")
atexit.register(shutil.rmtree, data_dir, True)
split_at = int(0.9 * len(ids))
ids[:split_at].tofile(os.path.join(data_dir, "train.bin"))
ids[split_at:].tofile(os.path.join(data_dir, "val.bin"))


def get_batch(split: str) -> tuple[torch.Tensor, torch.Tensor]:
    data = np.memmap(os.path.join(data_dir, f"{split}.bin"), dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - args.block_size, (args.batch_size,))
    x = torch.stack([torch.from_numpy(data[i:i + args.block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + args.block_size].astype(np.int64)) for i in ix])
    return x, y


# -- model -------------------------------------------------------------------------------------------------------
class GPT(nn.Module):
    def __init__(self, vocab: int, block: int, d: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(block), persistent=False)
        for embedding in (self.tok, self.pos):  # small, as GPTs start
            nn.init.normal_(embedding.weight, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):  # type: ignore[no-untyped-def]
        t = idx.shape[1]
        h = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        h = self.ln(self.blocks(h, mask=self.mask[:t, :t], is_causal=True))
        logits = self.head(h)
        loss = None if targets is None else nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


torch.manual_seed(1337)
model = GPT(len(chars), args.block_size)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, betas=(0.9, 0.95))
warmup, lr_max = 10, 1e-3


def lr_at(it: int) -> float:
    if it < warmup:
        return lr_max * (it + 1) / warmup
    return 0.1 * lr_max + 0.45 * lr_max * (1 + math.cos(math.pi * min(1.0, (it - warmup) / max(1, args.max_iters - warmup))))


@torch.no_grad()
def estimate_loss() -> dict[str, float]:
    out = {}
    model.eval()
    for split in ("train", "val"):
        losses = torch.zeros(args.eval_iters)
        for k in range(args.eval_iters):
            x, y = get_batch(split)
            _, loss = model(x, y)
            losses[k] = loss.item()
        out[split] = losses.mean().item()
    model.train()
    return out


start = time.perf_counter()
for it in range(args.max_iters):
    if it % args.eval_interval == 0:
        losses = estimate_loss()
        print(f"step {it}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    for group in optimizer.param_groups:
        group["lr"] = lr_at(it)
    x, y = get_batch("train")
    _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if it % args.log_interval == 0:
        print(f"iter {it}: loss {loss.item():.4f}")
print(f"training time: {time.perf_counter() - start:.3f} s")
