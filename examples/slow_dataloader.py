"""Planted bottleneck: a Dataset doing heavy per-item work, loaded with num_workers=0.

Every item is "augmented" in NumPy (noise, a blur by repeated shifts, normalisation) in the main
process, so the model waits for data most of each step. `trainspeed doctor` should say input_bound.
"""

import argparse

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class AugmentedImages(Dataset):
    def __init__(self, n: int = 4096, size: int = 48) -> None:
        rng = np.random.default_rng(0)
        self.images = rng.random((n, 3, size, size), dtype=np.float32)
        self.labels = rng.integers(0, 10, n)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int):
        x = self.images[i] + np.random.default_rng(i).normal(0, 0.05, self.images[i].shape).astype(np.float32)
        for _ in range(6):  # a cheap box blur, many times: real per-item CPU work
            x = (x + np.roll(x, 1, axis=1) + np.roll(x, 1, axis=2)) / 3
        x = (x - x.mean()) / (x.std() + 1e-6)
        return torch.from_numpy(x), int(self.labels[i])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    gpu = args.device != "cpu"
    loader = DataLoader(AugmentedImages(), batch_size=32, shuffle=True, num_workers=args.workers, pin_memory=gpu)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 48 * 48, 128), nn.ReLU(), nn.Linear(128, 10)).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        for x, y in loader:
            if gpu:
                x, y = x.to(args.device, non_blocking=True), y.to(args.device, non_blocking=True)
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch + 1}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
