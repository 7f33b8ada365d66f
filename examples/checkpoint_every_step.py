"""Planted bottleneck: a full checkpoint (model + optimizer state) saved with torch.save every step.

`trainspeed doctor` should say checkpoint_heavy.
"""

import argparse
import os
import tempfile

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    x, y = torch.randn(16, 512).to(args.device), torch.randint(0, 10, (16,)).to(args.device)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.pt")
        for step in range(args.steps):
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, path)
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
