"""An image classifier whose Dataset augments each sample with Pillow, as scripts built on torchvision's PIL
transforms do (a realistic example, written for trainspeed, not copied from one): each `__getitem__` makes a PIL
image, resizes it, rotates it by a random angle and blurs it (the augmentation, one line), then turns it into a
normalised tensor; a DataLoader with `--workers` worker processes (0: in the training process), a small CNN and
SGD with momentum.

The images are scikit-learn's bundled 8x8 digits (nothing to download), resized to 64x64 sample by sample.

What it really does (the counts tests/test_realistic_examples.py checks): ceil(1500 / batch) optimizer steps per
epoch, `--epochs` epochs; one `.item()` read per step; no evaluation, no checkpoint. `--times PATH` writes what the
script's own clock read: the training loop's seconds and the augmentation line's (JSON), to hold the doctor's share
of that line against.

    python examples/realistic/pil_augment.py [--epochs 3] [--batch-size 64] [--workers 0] [--flip-only]
        [--augment-on-batch] [--times PATH]

`--augment-on-batch` applies input_bound's "augment on the device" (the CPU is the device here): the rotation and blur
of the Pillow line done to each batch in the training loop with torch (a random angle per sample, bicubic; a Gaussian
blur of radius 1), the resize and the tensor as before.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import torch
from PIL import Image, ImageFilter
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--workers", type=int, default=0)
parser.add_argument("--flip-only", action="store_true", help="a random horizontal flip for the rotation and blur")
parser.add_argument("--augment-on-batch", action="store_true",
                    help="the rotation and blur on each batch in the training loop, not per sample with Pillow")
parser.add_argument("--times", help="write the loop's and the augmentation line's seconds here (JSON)")
args = parser.parse_args()
augment_s = 0.0


class Digits(Dataset):
    def __init__(self, images: np.ndarray, labels: torch.Tensor) -> None:
        self.images, self.labels = images, labels
        self.rng = np.random.default_rng(0)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        global augment_s
        image = Image.fromarray(self.images[i]).resize((64, 64), Image.BILINEAR)
        start = time.perf_counter()
        if args.augment_on_batch:  # the batch is rotated and blurred in the training loop (augment_batch)
            x = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).unsqueeze(0)
            return x, self.labels[i]
        if args.flip_only:
            image = image.transpose(Image.FLIP_LEFT_RIGHT) if self.rng.random() < 0.5 else image
        else:
            image = image.rotate(float(self.rng.uniform(-15, 15)), resample=Image.BICUBIC).filter(ImageFilter.GaussianBlur(1))
        augment_s += time.perf_counter() - start
        x = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).unsqueeze(0)
        return (x - 0.3) / 0.3, self.labels[i]


def augment_batch(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """`--augment-on-batch`: what __getitem__'s Pillow line does to each sample, on the whole batch at once - a rotation
    by a random angle in [-15, 15] degrees (bicubic, the corners filled black) and a Gaussian blur of radius 1 - then
    the same normalisation."""
    angles = torch.empty(len(x)).uniform_(-15, 15, generator=generator) * math.pi / 180
    cos, sin = torch.cos(angles), torch.sin(angles)
    theta = torch.stack([torch.stack([cos, -sin, torch.zeros_like(cos)], 1),
                         torch.stack([sin, cos, torch.zeros_like(cos)], 1)], 1)
    grid = nn.functional.affine_grid(theta, list(x.shape), align_corners=False)
    x = nn.functional.grid_sample(x, grid, mode="bicubic", padding_mode="zeros", align_corners=False)
    taps = torch.exp(-torch.arange(-2.0, 3.0) ** 2 / 2)
    kernel = (taps[:, None] * taps[None, :] / taps.sum() ** 2).view(1, 1, 5, 5)
    x = nn.functional.conv2d(x, kernel, padding=2)
    return (x - 0.3) / 0.3


def main() -> None:
    digits = load_digits()
    images = (digits.images * 255 / 16).astype(np.uint8)  # as an image file decodes: uint8 pixels
    train = DataLoader(Digits(images[:1500], torch.tensor(digits.target[:1500])), batch_size=args.batch_size,
                       shuffle=True, num_workers=args.workers)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 16 * 16, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    generator = torch.Generator().manual_seed(0)  # --augment-on-batch's angles
    start = time.perf_counter()
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in train:
            if args.augment_on_batch:
                with torch.no_grad():
                    x = augment_batch(x, generator)
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch}: mean loss {total / len(train):.4f}")
    loop_s = time.perf_counter() - start
    print(f"training loop: {loop_s:.2f} s")
    if args.times:
        with open(args.times, "w") as f:
            json.dump({"loop_s": loop_s, "augment_s": augment_s}, f)


if __name__ == "__main__":
    main()
