"""A variational autoencoder trained the way the classic VAE examples do it (a realistic example, written for
trainspeed, not copied from one): an MLP encoder to a mean and log-variance, the reparameterisation trick, a
decoder, the loss as binary cross-entropy plus the KL term summed over the batch, Adam; after each epoch a test
pass under `torch.no_grad()` and a grid of samples decoded from random codes saved with `torch.save` (where the
classic examples write an image).

The images are scikit-learn's bundled 8x8 digits (nothing to download).

What it really does (the counts tests/test_realistic_examples.py checks): ceil(1500 / batch) optimizer steps per
epoch, `--epochs` epochs; one evaluation and one save per epoch; the running loss read with `.item()` every step.

    python examples/realistic/vae.py [--epochs 3] [--batch-size 32] [--fit]

`--fit` applies only the doctor's launch_bound action: each epoch's steps taken by trainspeed's fast loop
(`trainspeed.loop.FastLoop`, what `trainspeed.fit` runs: it captures the step and replays it once enough steps are
left to repay the capture, about 1 200 here), Adam `fused=True` so that no host read stops the capture.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import tempfile
import time

import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--fit", action="store_true",
                    help="each epoch's steps run by trainspeed's fast loop (the step captured once and replayed "
                         "without Python), Adam fused=True; the test pass and the save as before")
args = parser.parse_args()
if args.fit:  # imported before the clock starts, as an import at a script's top is
    from trainspeed.loop import FastLoop


class VAE(nn.Module):
    def __init__(self, d: int = 64, hidden: int = 128, latent: int = 8) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d, hidden), nn.ReLU())
        self.mu, self.logvar = nn.Linear(hidden, latent), nn.Linear(hidden, latent)
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, d))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.dec(z), mu, logvar


def vae_loss(logits: torch.Tensor, x: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    bce = nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


digits = load_digits()
x = torch.tensor(digits.data, dtype=torch.float32) / 16
train = DataLoader(TensorDataset(x[:1500]), batch_size=args.batch_size, shuffle=True)
test = DataLoader(TensorDataset(x[1500:]), batch_size=128)
out_dir = tempfile.mkdtemp(prefix="vae_")
atexit.register(shutil.rmtree, out_dir, True)

torch.manual_seed(0)
model = VAE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=args.fit or None)  # fused: no host read to freeze
start = time.perf_counter()
loop = None
if args.fit:  # the same shuffled batches of 32 from the same rows, each the input and its own target
    loop = FastLoop(model, (x[:1500], x[:1500]), lambda out, target: vae_loss(out[0], target, out[1], out[2]),
                    optimizer, epochs=args.epochs, batch_size=args.batch_size, record_every=1)
for epoch in range(args.epochs):
    model.train()
    train_loss = 0.0
    if loop is not None:
        loop.run(loop.steps_per_epoch)
    for (batch,) in train if loop is None else ():
        optimizer.zero_grad()
        logits, mu, logvar = model(batch)
        loss = vae_loss(logits, batch, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    model.eval()
    test_loss = 0.0
    with torch.no_grad():
        for (batch,) in test:
            logits, mu, logvar = model(batch)
            test_loss += vae_loss(logits, batch, mu, logvar).item()
        samples = torch.sigmoid(model.dec(torch.randn(64, 8))).view(64, 8, 8)
    torch.save(samples, os.path.join(out_dir, f"sample_{epoch}.pt"))
    if loop is None:
        print(f"epoch {epoch}: train loss {train_loss / 1500:.3f}, test loss {test_loss / 297:.3f}")
    else:  # the fast loop's losses stay on the device until it finishes
        print(f"epoch {epoch}: test loss {test_loss / 297:.3f}")
if loop is not None:
    result = loop.finish()
    for epoch in range(args.epochs):
        losses = result.losses[epoch * loop.steps_per_epoch:(epoch + 1) * loop.steps_per_epoch]
        print(f"epoch {epoch}: train loss {sum(losses) / 1500:.3f}")
    print(f"trainspeed.fit: {result.strategy.name}, {result.timings.steps} steps")
print(f"training time: {time.perf_counter() - start:.3f} s")
