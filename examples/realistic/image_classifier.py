"""An image classifier trained the way many vision scripts do it (a realistic example, written for trainspeed, not
copied from one): a Dataset whose `__getitem__` applies torchvision-style per-sample transforms (to a float tensor,
then resize, random crop with padding, brightness jitter and normalisation, each an nn.Module of a few small torch
ops on one image, as torchvision's are), a DataLoader with `--workers` worker processes (0: in the training
process), a small CNN, SGD with momentum and a step learning-rate schedule, and the accuracy on a held-out split at
each epoch's end.

The images are scikit-learn's bundled 8x8 digits as uint8 arrays, resized to 32x32 sample by sample (nothing to
download).

What it really does (the counts tests/test_realistic_examples.py checks): ceil(1500 / batch) optimizer steps per
epoch, `--epochs` epochs; one evaluation per epoch (model.eval() ... model.train()); no checkpoint.

    python examples/realistic/image_classifier.py [--epochs 2] [--batch-size 64] [--workers 0] [--threads 0]
        [--precompute] [--augment-on-batch]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--workers", type=int, default=0)
parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
parser.add_argument("--precompute", action="store_true",
                    help="decode, resize and normalise each image once, before training; crop and jitter per sample")
parser.add_argument("--augment-on-batch", action="store_true",
                    help="crop and jitter each batch at once in the training loop, not each sample in __getitem__")
args = parser.parse_args()


class Compose:
    def __init__(self, *steps):  # type: ignore[no-untyped-def]
        self.steps = steps

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        for step in self.steps:
            image = step(image)
        return image


def to_tensor(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(image).float().div(255).unsqueeze(0)


class Resize(nn.Module):  # torchvision's transforms are nn.Modules (all but ToTensor), called on each sample
    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return nn.functional.interpolate(image[None], size=self.size, mode="bilinear", align_corners=False)[0]


class RandomCrop(nn.Module):
    def __init__(self, size: int, padding: int) -> None:
        super().__init__()
        self.size, self.padding = size, padding

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        padded = nn.functional.pad(image, (self.padding,) * 4)
        top, left = torch.randint(0, 2 * self.padding + 1, (2,)).tolist()
        return padded[:, top:top + self.size, left:left + self.size]


class Brightness(nn.Module):  # ColorJitter's brightness
    def __init__(self, amount: float) -> None:
        super().__init__()
        self.amount = amount

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return image * (1 + self.amount * (2 * torch.rand(()) - 1))


class Normalize(nn.Module):
    def __init__(self, mean: float, std: float) -> None:
        super().__init__()
        self.mean, self.std = mean, std

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return (image - self.mean) / self.std


def augment_batch(images: torch.Tensor, size: int = 32, padding: int = 4, amount: float = 0.2) -> torch.Tensor:
    """RandomCrop and Brightness on a batch (N, 1, H, W) at once: each image its own offsets and factor."""
    n = len(images)
    padded = nn.functional.pad(images, (padding,) * 4)
    top, left = torch.randint(0, 2 * padding + 1, (2, n, 1))
    rows, cols = top + torch.arange(size), left + torch.arange(size)  # (N, size) each
    cropped = padded[torch.arange(n)[:, None, None], 0, rows[:, :, None], cols[:, None, :]].unsqueeze(1)
    return cropped * (1 + amount * (2 * torch.rand(n, 1, 1, 1) - 1))


class Digits(Dataset):
    def __init__(self, images: np.ndarray, labels: torch.Tensor, transform) -> None:  # type: ignore[no-untyped-def]
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.transform(self.images[i]), self.labels[i]


def main() -> None:
    if args.threads:
        torch.set_num_threads(args.threads)
    digits = load_digits()
    images = (digits.images * 255 / 16).astype(np.uint8)  # as an image file decodes: uint8 pixels
    labels = torch.tensor(digits.target)
    test_tf = Compose(to_tensor, Resize(32), Normalize(0.3, 0.3))
    per_sample = () if args.augment_on_batch else (RandomCrop(32, 4), Brightness(0.2))
    train_set = Digits(images[:1500], labels[:1500],
                       Compose(to_tensor, Resize(32), *per_sample, Normalize(0.3, 0.3)))
    if args.precompute:  # the deterministic part once, the random part per sample (jitter after normalising)
        fixed = torch.stack([test_tf(image) for image in images[:1500]])
        train_set = Digits(fixed, labels[:1500], Compose(*per_sample))  # type: ignore[arg-type]
    train = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                       num_workers=args.workers, persistent_workers=args.workers > 0)
    test = DataLoader(Digits(images[1500:], labels[1500:], test_tf), batch_size=256)

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        for x, y in train:
            if args.augment_on_batch:
                x = augment_batch(x)
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in test:
                correct += int((model(x).argmax(1) == y).sum())
        print(f"epoch {epoch}: loss {loss.item():.4f}, test accuracy {correct / len(test.dataset):.1%}")
    print(f"training time: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":  # DataLoader workers import this module again on some platforms
    main()
