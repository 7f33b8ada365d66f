"""A DCGAN trained the way the classic DCGAN examples do it (a realistic example, written for trainspeed, not copied
from one): a generator of transposed convolutions and a discriminator of strided convolutions, both with batch norm
and the DCGAN weight init, two Adam optimizers; each iteration updates the discriminator on a real batch and on a
fake one (two losses, two backward calls, one optimizer step), then the generator (one backward, one step), reading
D(x), D(G(z)) and both losses with `.item()`; the losses printed every `--log-every` iterations, a batch of samples
from a fixed noise saved with `torch.save` every `--sample-every` iterations and both models' weights at each
epoch's end.

The images are made up from a fixed seed (nothing to download): `--images` random 32x32 images in [-1, 1], as a
FakeData set would give them.

What it really does (the counts tests/test_realistic_examples.py checks): `--epochs` epochs of
`ceil(images / batch size)` iterations, each 3 backward calls and 2 optimizer steps (the discriminator's, then the
generator's); 4 reads a iteration; the samples' and the epochs' saves.

    python examples/realistic/dcgan.py [--epochs 2] [--images 1024] [--batch-size 64] [--workers 2] [--bf16]

`--bf16` applies only bf16 autocast (a recipe change: the products' inputs rounded to bfloat16): both networks'
forward passes under `torch.autocast("cpu", dtype=torch.bfloat16)`, the losses in float32.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NZ, NGF, NDF, NC = 64, 32, 32, 3


class Generator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(NGF * 4), nn.ReLU(True),  # 4x4
            nn.ConvTranspose2d(NGF * 4, NGF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF * 2), nn.ReLU(True),  # 8x8
            nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF), nn.ReLU(True),  # 16x16
            nn.ConvTranspose2d(NGF, NC, 4, 2, 1, bias=False), nn.Tanh(),  # 32x32
        )

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(NC, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),  # 16x16
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 2, NDF * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 4), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 4, 1, 4, 1, 0, bias=False), nn.Sigmoid(),
        )

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.main(input).view(-1, 1).squeeze(1)


def weights_init(m: nn.Module) -> None:
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--images", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--sample-every", type=int, default=10)
    parser.add_argument("--outf", type=Path, default=Path("."))
    parser.add_argument("--bf16", action="store_true", help="both networks' forward passes under bf16 autocast")
    args = parser.parse_args()
    torch.manual_seed(999)
    images = torch.rand(args.images, NC, 32, 32) * 2 - 1
    dataloader = DataLoader(TensorDataset(images), batch_size=args.batch_size, shuffle=True,
                            num_workers=args.workers)
    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    netD.apply(weights_init)
    criterion = nn.BCELoss()
    fixed_noise = torch.randn(args.batch_size, NZ, 1, 1)
    real_label, fake_label = 1.0, 0.0
    optimizerD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(0.5, 0.999))

    def amp() -> torch.autocast:  # --bf16: the networks' products in bfloat16 (the losses in float32, as BCELoss needs)
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16)

    def discriminate(x: torch.Tensor) -> torch.Tensor:
        with amp():
            output = netD(x)
        return output.float() if args.bf16 else output

    start, iteration = time.perf_counter(), 0
    for epoch in range(args.epochs):
        for i, (real,) in enumerate(dataloader):
            # (1) the discriminator: maximize log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            batch_size = real.size(0)
            label = torch.full((batch_size,), real_label)
            output = discriminate(real)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()
            noise = torch.randn(batch_size, NZ, 1, 1)
            with amp():
                fake = netG(noise)
            label.fill_(fake_label)
            output = discriminate(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()
            # (2) the generator: maximize log(D(G(z)))
            netG.zero_grad()
            label.fill_(real_label)
            output = discriminate(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()
            if i % args.log_every == 0:
                print(f"[{epoch}/{args.epochs}][{i}/{len(dataloader)}] Loss_D: {errD.item():.4f} "
                      f"Loss_G: {errG.item():.4f} D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}")
            if iteration % args.sample_every == 0:
                with torch.no_grad():
                    torch.save(netG(fixed_noise), args.outf / "fake_samples.pt")
            iteration += 1
        torch.save(netG.state_dict(), args.outf / f"netG_epoch_{epoch}.pth")
        torch.save(netD.state_dict(), args.outf / f"netD_epoch_{epoch}.pth")
    print(f"training time: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
