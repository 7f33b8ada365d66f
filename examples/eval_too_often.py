"""Planted bottleneck: the whole validation set evaluated every 50 training steps.

Each evaluation runs the model over 50 000 held-out rows (100 forward passes of 500), as long as
about 35 training steps, so four steps in ten of the run's time go to evaluating, not training.
`trainspeed doctor` should say evaluation_heavy.
"""

import argparse

import torch
from torch import nn


def train(steps: int, every: int) -> None:
    torch.manual_seed(0)
    x, y = torch.randn(512, 256), torch.randint(0, 10, (512,))
    x_val, y_val = torch.randn(50_000, 256), torch.randint(0, 10, (50_000,))
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % every == 0:
            model.eval()
            with torch.no_grad():
                correct = sum(int((model(x_val[i:i + 500]).argmax(1) == y_val[i:i + 500]).sum())
                              for i in range(0, len(x_val), 500))
            model.train()
            print(f"step {step}: loss {loss.item():.4f}, validation accuracy {correct / len(x_val):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--every", type=int, default=50, help="training steps between evaluations")
    args = parser.parse_args()
    train(args.steps, args.every)


if __name__ == "__main__":
    main()
