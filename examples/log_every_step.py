"""Planted bottleneck: a JSON log record written and flushed to disk (fsync) every step.

`trainspeed doctor` should say logging_heavy and point at the logging line.
"""

import argparse
import json
import os
import tempfile

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()
    x, y = torch.randn(128, 256).to(args.device), torch.randint(0, 10, (128,)).to(args.device)
    with tempfile.TemporaryDirectory() as folder, open(os.path.join(folder, "train.log"), "a") as log:
        for step in range(args.steps):
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            record = {"step": step, "loss": loss.item(), "grad_norms": [p.grad.norm().item() for p in model.parameters()]}
            log.write(json.dumps(record) + "\n"); log.flush(); os.fsync(log.fileno())  # to disk, every step
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
