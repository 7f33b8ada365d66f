"""Planted bottleneck: a scikit-learn metric (macro F1) computed on the host after every step.

`trainspeed doctor` should say host_code_heavy and point at the metric's line: the time goes to the
script's own host code, outside every PyTorch phase, and not to torch ops.
"""

import argparse

import torch
from sklearn.datasets import load_digits
from sklearn.metrics import f1_score
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=512)
    args = parser.parse_args()
    torch.manual_seed(0)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    scores = []
    for step in range(args.steps):
        start = (step * args.batch) % (len(x) - args.batch)
        xb, yb = x[start:start + args.batch], y[start:start + args.batch]
        out = model(xb)
        loss = criterion(out, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scores.append(f1_score(yb.numpy(), out.argmax(1).numpy(), average="macro"))  # on the host, every step
    print(f"final loss {loss.item():.4f}, macro F1 of the last batch {scores[-1]:.3f}")


if __name__ == "__main__":
    main()
