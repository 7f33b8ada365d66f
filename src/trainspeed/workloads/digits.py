"""scikit-learn's bundled 8x8 digits, as tensors and as a Dataset that does real per-item work.

`AugmentedDigits` stores each image as PNG bytes (upscaled to 64x64 once, as image files on disk
are) and, per item, decodes it, rotates and crops it at random and resizes it to 32x32: the
decode-and-augment work a DataLoader's workers exist to parallelise.
"""

from __future__ import annotations

import io

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

STORED = 64
SIDE = 32


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    return digits.images.astype(np.float32) / 16.0, digits.target.astype(np.int64)  # (1797, 8, 8) in [0, 1]


def digits_tensors() -> tuple[torch.Tensor, torch.Tensor]:
    images, target = digits_arrays()
    return torch.from_numpy(images).unsqueeze(1), torch.from_numpy(target)  # (N, 1, 8, 8), (N,)


class AugmentedDigits(Dataset):
    """Digits as PNG bytes; each item is decoded, randomly rotated (+/-15 degrees), cropped and resized."""

    def __init__(self, seed: int = 0) -> None:
        from PIL import Image

        images, target = digits_arrays()
        self.pngs: list[bytes] = []
        for img in images:
            pil = Image.fromarray((img * 255).astype(np.uint8)).resize((STORED, STORED), Image.BICUBIC)  # type: ignore[attr-defined]  # Pillow's stubs lack the constant
            buf = io.BytesIO()
            pil.save(buf, format="PNG")
            self.pngs.append(buf.getvalue())
        self.target = torch.from_numpy(target)
        self.seed = seed

    def __len__(self) -> int:
        return len(self.pngs)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        from PIL import Image

        rng = np.random.default_rng((self.seed, i, torch.initial_seed() % 2**32))
        img = Image.open(io.BytesIO(self.pngs[i])).convert("L")
        img = img.rotate(float(rng.uniform(-15, 15)), resample=Image.BILINEAR)  # type: ignore[attr-defined]  # Pillow's stubs lack the constant
        left, top = (int(v) for v in rng.integers(0, STORED // 8, size=2))
        crop = STORED - STORED // 8
        img = img.crop((left, top, left + crop, top + crop)).resize((SIDE, SIDE), Image.BILINEAR)  # type: ignore[attr-defined]  # Pillow's stubs lack the constant
        x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).unsqueeze(0)  # (1, 32, 32)
        return x, self.target[i]


class DigitsCNN32(nn.Module):
    """Three 3x3 convolutions with pooling for 1x32x32 digits."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.conv3 = nn.Conv2d(2 * width, 4 * width, 3, padding=1)
        self.fc = nn.Linear(4 * width * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, 1, 32, 32)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (N, w, 16, 16)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (N, 2w, 8, 8)
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)  # (N, 4w, 4, 4)
        return self.fc(x.flatten(1))
