"""A tabular classifier fed the way many first PyTorch scripts feed one (a realistic example, written for trainspeed,
not copied from one): a Dataset that reads one row of a pandas DataFrame per item (`frame.iloc[i]`, its numeric
columns as a float tensor, its categories looked up in a dict), a DataLoader with one worker process "to load in the
background", a small MLP with Adam, a validation pass after each epoch and its accuracy printed.

The rows are made up from a fixed seed (nothing to download): `--rows` of them, 12 numeric and 2 categorical
columns, a label that depends on both; a fifth of them held out for validation.

What it really does (the counts tests/test_realistic_examples.py checks): ceil(0.8 rows / batch) optimizer steps
per epoch, `--epochs` epochs, one validation pass of ceil(0.2 rows / batch) batches after each; every batch made by
the loaders' worker processes (new ones each pass unless `--persistent`); one `.item()` read per step.

    python examples/realistic/frame_rows.py [--epochs 4] [--rows 5000] [--batch-size 32] [--workers 1]
        [--persistent] [--threads N]

`--workers 2 --persistent --threads 1` applies the doctor's input_bound action on a 2-core machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--rows", type=int, default=5000)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--workers", type=int, default=1)
parser.add_argument("--persistent", action="store_true", help="persistent_workers=True")
parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads(N)")
args = parser.parse_args()
if args.threads:
    torch.set_num_threads(args.threads)

rng = np.random.default_rng(0)
numeric = [f"x{i}" for i in range(12)]
frame = pd.DataFrame({name: rng.normal(i, 1 + i / 4, args.rows) for i, name in enumerate(numeric)})
frame["region"] = rng.choice(["north", "south", "east", "west"], args.rows)
frame["segment"] = rng.choice(["retail", "business", "public"], args.rows)
frame["label"] = ((frame["x0"] - frame["x3"] / 2 + (frame["region"] == "east")) > 0).astype(int)
categories = {column: {v: i for i, v in enumerate(sorted(frame[column].unique()))} for column in ("region", "segment")}


class FrameRows(Dataset):
    def __init__(self, rows: pd.DataFrame) -> None:
        self.rows = rows.reset_index(drop=True)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        row = self.rows.iloc[i]
        x = torch.tensor(row[numeric].to_numpy(dtype=np.float32))
        cats = torch.tensor([categories[c][row[c]] for c in ("region", "segment")])
        return x, cats, torch.tensor(row["label"])


class TabularNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.region = nn.Embedding(4, 4)
        self.segment = nn.Embedding(3, 3)
        self.mlp = nn.Sequential(nn.Linear(len(numeric) + 7, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x: torch.Tensor, cats: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([x, self.region(cats[:, 0]), self.segment(cats[:, 1])], dim=1))


torch.manual_seed(0)
held_out = frame.sample(frac=0.2, random_state=0)
loader_args = {"batch_size": args.batch_size, "num_workers": args.workers,
               "persistent_workers": args.persistent and args.workers > 0}
train = DataLoader(FrameRows(frame.drop(held_out.index)), shuffle=True, **loader_args)
val = DataLoader(FrameRows(held_out), **loader_args)
model = TabularNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
start = time.perf_counter()
for epoch in range(args.epochs):
    model.train()
    total = 0.0
    for x, cats, y in train:
        loss = nn.functional.cross_entropy(model(x, cats), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, cats, y in val:
            correct += int((model(x, cats).argmax(1) == y).sum())
    print(f"epoch {epoch}: loss {total / len(train):.4f}, val accuracy {correct / len(held_out):.3f}")
print(f"training time: {time.perf_counter() - start:.3f} s")
