"""PyTorch Lightning's Trainer fitting a small CNN on scikit-learn's 8x8 digits (bundled: nothing downloaded), with
a CSV logger and a progress bar as people run it. The flags are the Trainer's and its callbacks' own; the defaults
are a healthy run, and each planted bottleneck is one flag away:

    python examples/frameworks/lightning_trainer.py --log-every-n-steps 1      # logging every step
    python examples/frameworks/lightning_trainer.py --val-check-interval 2     # validating too often
    python examples/frameworks/lightning_trainer.py --every-n-train-steps 1    # checkpointing every step
    python examples/frameworks/lightning_trainer.py --augment-in-loader        # a starved loader: per-sample augmentation
    python examples/frameworks/lightning_trainer.py --augment-on-batch         # the same augmentation, a batch at once

`--device cuda` trains on the GPU (`Trainer(accelerator="gpu")`).

Needs `pip install 'trainspeed[lightning]'`. Logs and checkpoints go to a temporary folder.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, Dataset


def augment(images: torch.Tensor) -> torch.Tensor:
    """torchvision-style RandomAffine (a rotation and a shift drawn per image) and GaussianBlur on (N, 1, 32, 32)."""
    n = len(images)
    angle, shift = torch.empty(n).uniform_(-0.3, 0.3), torch.empty(n, 2).uniform_(-0.1, 0.1)
    cos, sin = torch.cos(angle), torch.sin(angle)
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, [n, 1, 32, 32], align_corners=False)
    images = F.grid_sample(images, grid, align_corners=False)
    kernel = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0]) / 16
    images = F.conv2d(images, kernel.view(1, 1, 1, 5), padding=(0, 2))
    return F.conv2d(images, kernel.view(1, 1, 5, 1), padding=(2, 0))


class Digits(Dataset):
    """8x8 digits upscaled to 32x32; with `augment`, each item is augmented as it is asked for (one at a time)."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, augment: bool) -> None:
        self.images, self.labels, self.augment = images, labels, augment

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = augment(self.images[i][None])[0] if self.augment else self.images[i]
        return image, self.labels[i]


class Classifier(L.LightningModule):
    def __init__(self, augment_batches: bool = False) -> None:
        super().__init__()
        self.augment_batches = augment_batches
        self.net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Flatten(), nn.Linear(32 * 8 * 8, 512), nn.ReLU(), nn.Linear(512, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def on_after_batch_transfer(self, batch, dataloader_idx):  # type: ignore[no-untyped-def]
        if self.augment_batches and self.trainer.training:  # the whole batch at once, where the model runs
            x, y = batch
            return augment(x), y
        return batch

    def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_loss", loss, prog_bar=True)
        self.log("train_acc", (logits.argmax(1) == y).float().mean(), prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-steps", type=int, default=120)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--log-every-n-steps", type=int, default=50)
    p.add_argument("--val-check-interval", type=int, default=0, help="0: once per epoch")
    p.add_argument("--every-n-train-steps", type=int, default=0, help="ModelCheckpoint's; 0: no checkpoints")
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--augment-in-loader", action="store_true")
    p.add_argument("--augment-on-batch", action="store_true", help="augment in on_after_batch_transfer instead")
    p.add_argument("--trainspeed-json", metavar="PATH", help="watch with trainspeed's callback; its report to PATH")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = p.parse_args()

    digits = load_digits()
    images = F.interpolate(torch.tensor(digits.images, dtype=torch.float32)[:, None] / 16, size=32, mode="bilinear")
    labels = torch.tensor(digits.target)
    L.seed_everything(0, verbose=False)
    train = DataLoader(Digits(images[:1500], labels[:1500], args.augment_in_loader), batch_size=args.batch_size,
                       shuffle=True, num_workers=args.num_workers, persistent_workers=args.num_workers > 0)
    val = DataLoader(Digits(images[1500:], labels[1500:], False), batch_size=args.batch_size)
    with tempfile.TemporaryDirectory() as out:
        callbacks: list[L.Callback] = ([ModelCheckpoint(dirpath=out, every_n_train_steps=args.every_n_train_steps,
                                                         save_top_k=1)] if args.every_n_train_steps else [])
        if args.trainspeed_json:
            from trainspeed.integrations.lightning import TrainspeedCallback

            callbacks.append(TrainspeedCallback(json=args.trainspeed_json))
        trainer = L.Trainer(max_steps=args.max_steps, accelerator="gpu" if args.device == "cuda" else "cpu",
                            devices=1, logger=CSVLogger(out),
                            log_every_n_steps=args.log_every_n_steps, val_check_interval=args.val_check_interval or None,
                            check_val_every_n_epoch=None if args.val_check_interval else 1,
                            enable_checkpointing=bool(args.every_n_train_steps), callbacks=callbacks,
                            enable_model_summary=False)
        start = time.perf_counter()
        trainer.fit(Classifier(args.augment_on_batch), train, val)
        print(f"training time: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
