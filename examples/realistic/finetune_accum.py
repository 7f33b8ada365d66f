"""Fine-tuning a small pretrained-style text classifier the way many fine-tuning scripts do (a realistic example,
written for trainspeed, not copied from one): a DataLoader of token ids, gradient accumulation over
`--accum` micro-batches with the loss divided by it, gradient clipping, AdamW with a linear warm-up and decay
(`LambdaLR`, stepped after each optimizer step), the running loss logged every `--log-every` optimizer steps, and
a checkpoint (`torch.save` of the model and optimizer) every `--save-every` optimizer steps.

What it really does, per run of S optimizer steps (the counts tests/examples/test_realistic.py checks):
- S optimizer steps of `--accum` forward and backward passes each;
- S // save_every saves;
- one `.item()` per micro-batch (the running loss, kept as a float): a read of a CPU tensor on the CPU.

    python examples/realistic/finetune_accum.py [--steps 40] [--accum 4] [--save-every 10] [--dropout 0.1]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import tempfile
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40, help="optimizer steps")
parser.add_argument("--accum", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--save-every", type=int, default=10)
parser.add_argument("--log-every", type=int, default=10)
parser.add_argument("--dropout", type=float, default=0.1, help="the encoder's dropout (0: none)")
args = parser.parse_args()

torch.manual_seed(0)
vocab, seq, classes = 1000, 48, 4
rows = args.steps * args.accum * args.batch_size
labels = torch.randint(0, classes, (rows,))
# each class's texts draw most of their tokens from its own quarter of the vocabulary: a topic to learn
topical = labels[:, None] * (vocab // classes) + torch.randint(0, vocab // classes, (rows, seq))
tokens = torch.where(torch.rand(rows, seq) < 0.7, topical, torch.randint(0, vocab, (rows, seq)))
loader = DataLoader(TensorDataset(tokens, labels), batch_size=args.batch_size, shuffle=True)


class Classifier(nn.Module):
    """An encoder as a pretrained checkpoint would give it, with a new classification head."""

    def __init__(self, d: int = 96) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=args.dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(ids)).mean(1))


model = Classifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
warmup = max(1, args.steps // 10)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: min((s + 1) / warmup, max(0.0, (args.steps - s) / max(1, args.steps - warmup))))
out_dir = tempfile.mkdtemp(prefix="finetune_")
atexit.register(shutil.rmtree, out_dir, True)

model.train()
step, running = 0, 0.0
start = time.perf_counter()
for micro, (ids, y) in enumerate(loader):
    loss = nn.functional.cross_entropy(model(ids), y) / args.accum
    loss.backward()
    running += loss.item()
    if (micro + 1) % args.accum:
        continue
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    step += 1
    if step % args.log_every == 0:
        print(f"step {step}: loss {running / args.log_every:.4f}, lr {scheduler.get_last_lr()[0]:.2e}")
        running = 0.0
    if step % args.save_every == 0:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                   os.path.join(out_dir, f"checkpoint-{step}.pt"))
print(f"done: {step} optimizer steps")
print(f"training time: {time.perf_counter() - start:.3f} s")
