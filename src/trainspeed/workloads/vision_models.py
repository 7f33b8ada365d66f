"""torchvision's classifiers as people train them, with random weights: nothing is downloaded.

ResNet-50 and ViT-B/16 at full width and depth, on 128x128 images so that a real step runs on a CPU
in seconds (ViT-B/16 is built for the size: its position embedding has one row per 16x16 patch).
Needs the `torchvision` extra; imported only when a model is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

CLASSES = 1000


@dataclass(frozen=True)
class VisionModel:
    build: Callable[[], nn.Module]
    image_size: int

    def images(self, batch: int) -> torch.Tensor:
        """A batch of random RGB images of the model's size."""
        return torch.randn(batch, 3, self.image_size, self.image_size)


def small_vision_models() -> dict[str, VisionModel]:
    from torchvision import models

    return {
        "resnet50": VisionModel(lambda: models.resnet50(weights=None, num_classes=CLASSES), 128),
        "vit_b_16": VisionModel(lambda: models.vit_b_16(weights=None, image_size=128, num_classes=CLASSES), 128),
    }
