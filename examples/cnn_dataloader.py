"""A DataLoader-fed CNN: CIFAR-sized images, per-item augmentation in workers, on the GPU if there is one.

A typical small image-classification loop: a Dataset that crops and flips each 3×32×32 image,
a DataLoader with worker processes and pinned memory, `non_blocking` copies to the device, a
small convolutional network with batch norm, SGD with momentum, and a `loss.item()` every 50
steps. The images are synthetic (seeded noise), so nothing is downloaded.

Nothing is planted here: run it under `trainspeed doctor` to see which part of such a step
dominates on your machine (on a fast GPU the workers' per-item work and the per-op launches
compete with the arithmetic).
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self, n: int, size: int = 32, pad: int = 4) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = torch.rand(n, 3, size + 2 * pad, size + 2 * pad, generator=g)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        self.size, self.pad = size, pad

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        top, left = torch.randint(0, 2 * self.pad + 1, (2,), generator=g).tolist()
        x = self.images[i, :, top:top + self.size, left:left + self.size]
        if torch.rand((), generator=g) < 0.5:
            x = x.flip(2)
        return (x - 0.5) / 0.25, self.labels[i]


def block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


def make_model() -> nn.Module:
    return nn.Sequential(
        block(3, 32), block(32, 32), nn.MaxPool2d(2),
        block(32, 64), block(64, 64), nn.MaxPool2d(2),
        block(64, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    loader = DataLoader(Images(args.images), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, pin_memory=device.type == "cuda", drop_last=True,
                        persistent_workers=args.workers > 0)
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    step = 0
    for epoch in range(args.epochs):
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = criterion(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if step % 50 == 0:
                print(f"epoch {epoch + 1} step {step}: loss {loss.item():.4f}")
    print(f"done: {step} steps, last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
