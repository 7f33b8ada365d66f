"""Planted bottleneck: a dataset held in memory as tensors, batched by a DataLoader row by row.

`DataLoader(TensorDataset(x, y), batch_size=256, shuffle=True)` fetches each batch's 256 rows one
`dataset[i]` at a time (two index ops per row) and stacks them again: on a small model that is half
the step and more. Worker processes do not help: handing a batch over between processes costs more
than making it. `trainspeed doctor` should say input_bound, and take each batch whole.
"""

import argparse

import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--whole", action="store_true", help="the fix: take each batch whole (BatchSampler)")
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(20000, 64)
    y = (x[:, 0] + x[:, 1] > 0).long()
    data = TensorDataset(x, y)
    if args.whole:
        loader = DataLoader(data, batch_size=None, sampler=BatchSampler(RandomSampler(data), args.batch, drop_last=False),
                            num_workers=args.workers)
    else:
        loader = DataLoader(data, batch_size=args.batch, shuffle=True, num_workers=args.workers)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(args.epochs):
        total = 0.0
        for xb, yb in loader:
            loss = nn.functional.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch + 1}: mean loss {total / len(loader):.4f}")


if __name__ == "__main__":
    main()
