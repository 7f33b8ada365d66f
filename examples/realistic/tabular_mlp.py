"""A tabular MLP trained the way many data-science notebooks turned scripts do it (a realistic example, written for
trainspeed, not copied from one): a pandas DataFrame of numeric and categorical columns, preprocessed again at
each epoch's start (standardised numeric columns, one-hot categories with `pd.get_dummies`, a fresh shuffle, the
result turned into tensors), minibatches cut by slicing those tensors, Adam, and the epoch's mean loss printed.

The rows are made up from a fixed seed (nothing to download): `--rows` of them, 6 numeric and 3 categorical
columns, a label that depends on both.

What it really does (the counts tests/test_realistic_examples.py checks): ceil(rows / batch) optimizer steps per
epoch, `--epochs` epochs; one preprocessing of the whole frame per epoch; one `.item()` read per step.

    python examples/realistic/tabular_mlp.py [--epochs 3] [--rows 20000] [--batch-size 256] [--preprocess-once]
        [--fit]

`--fit` applies only the doctor's launch_bound action: the same epochs and preprocessing, each epoch's steps
taken by trainspeed's fast loop (`trainspeed.loop.FastLoop`, what `trainspeed.fit` runs), Adam `fused=True` so
that no host read stops its capture.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--rows", type=int, default=20000)
parser.add_argument("--batch-size", type=int, default=256)
parser.add_argument("--preprocess-once", action="store_true", help="build the features once, shuffle by index")
parser.add_argument("--fit", action="store_true",
                    help="each epoch's steps run by trainspeed's fast loop (the step replayed without Python) on that "
                         "epoch's preprocessed rows")
args = parser.parse_args()
if args.fit:  # imported before the clock starts, as an import at a script's top is
    from trainspeed.loop import FastLoop

rng = np.random.default_rng(0)
frame = pd.DataFrame({f"x{i}": rng.normal(i, 1 + i, args.rows) for i in range(6)})
for name, levels in (("city", 40), ("device", 6), ("plan", 4)):
    frame[name] = rng.integers(0, levels, args.rows).astype(str)
frame["label"] = ((frame["x0"] + (frame["city"].astype(int) % 3) - frame["x2"] / 3) > 0).astype(int)
numeric = [f"x{i}" for i in range(6)]


def preprocess(df: pd.DataFrame, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    df = df.sample(frac=1.0, random_state=seed)
    features = (df[numeric] - df[numeric].mean()) / df[numeric].std()
    features = pd.concat([features, pd.get_dummies(df[["city", "device", "plan"]], dtype=float)], axis=1)
    return torch.tensor(features.to_numpy(dtype=np.float32)), torch.tensor(df["label"].to_numpy())


torch.manual_seed(0)
width = preprocess(frame.head(1000), 0)[0].shape[1]
model = nn.Sequential(nn.Linear(width, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=args.fit or None)  # fused: no host read a replay would freeze
start = time.perf_counter()
built = preprocess(frame, 0) if args.preprocess_once else None
loop = None
for epoch in range(args.epochs):
    if built is None:
        x, y = preprocess(frame, epoch)
    else:
        order = torch.randperm(args.rows)
        x, y = built[0][order], built[1][order]
    if args.fit:  # the same epochs, their steps taken by the fast loop: it captures the step once and replays it
        if loop is None:
            loop = FastLoop(model, (x.clone(), y.clone()), nn.CrossEntropyLoss(), optimizer, epochs=args.epochs,
                            batch_size=args.batch_size, record_every=1)
        else:
            assert loop.data.tensors is not None  # resident tensors, as given
            for held, rows in zip(loop.data.tensors, (x, y)):
                held.copy_(rows)  # this epoch's rows into the loop's resident data
        loop.run(loop.steps_per_epoch)
        continue
    total = 0.0
    for i in range(0, args.rows, args.batch_size):
        loss = nn.functional.cross_entropy(model(x[i:i + args.batch_size]), y[i:i + args.batch_size])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch}: loss {total / -(-args.rows // args.batch_size):.4f}")
if loop is not None:
    result = loop.finish()
    for epoch in range(args.epochs):
        losses = result.losses[epoch * loop.steps_per_epoch:(epoch + 1) * loop.steps_per_epoch]
        print(f"epoch {epoch}: loss {sum(losses) / len(losses):.4f}")
    print(f"trainspeed.fit: {result.strategy.name}, {result.timings.steps} steps")
print(f"training time: {time.perf_counter() - start:.3f} s")
