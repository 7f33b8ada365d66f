"""Planted bottleneck: a model trained in float64 because its data came from numpy.

`torch.tensor(numpy_array)` keeps numpy's float64, and the first forward pass then fails with "mat1
and mat2 must have the same dtype" until the model is made to match with `.double()`. Everything
then runs in double precision, which a CPU multiplies at about half its float32 rate or less.
`trainspeed doctor` should say slow_dtype. `--float32` runs the fix, for comparison.
"""

import argparse

import torch
from sklearn.datasets import load_digits
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--float32", action="store_true", help="the fix: data and model in float32")
    args = parser.parse_args()
    torch.manual_seed(0)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0)  # float64, as numpy made it
    y = torch.tensor(digits.target)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    if args.float32:
        x = x.float()
    else:
        model = model.double()  # the planted problem: the model made to match the data
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for step in range(args.steps):
        start = (step * args.batch) % (len(x) - args.batch)
        loss = criterion(model(x[start:start + args.batch]), y[start:start + args.batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
