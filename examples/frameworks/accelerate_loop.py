"""A training loop written around Hugging Face's `accelerate`, as its examples write one: `Accelerator.prepare`,
`accelerator.accumulate(model)` for gradient accumulation, `accelerator.backward(loss)`, a scheduler, and an
evaluation at each epoch's end with `accelerator.gather_for_metrics`. A small MLP on scikit-learn's digits.

    python examples/frameworks/accelerate_loop.py --epochs 3 --gradient-accumulation-steps 4

Needs `pip install 'trainspeed[accelerate]'`.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--gradient-accumulation-steps", type=int, default=4)
    p.add_argument("--mixed-precision", default="no", choices=["no", "bf16"])
    args = p.parse_args()

    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps,
                              mixed_precision=args.mixed_precision, cpu=True)
    torch.manual_seed(0)
    digits = load_digits()
    x, y = torch.tensor(digits.data, dtype=torch.float32) / 16, torch.tensor(digits.target)
    train = DataLoader(TensorDataset(x[:1500], y[:1500]), batch_size=args.batch_size, shuffle=True)
    val = DataLoader(TensorDataset(x[1500:], y[1500:]), batch_size=128)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * len(train))
    model, optimizer, train, val, scheduler = accelerator.prepare(model, optimizer, train, val, scheduler)

    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        for inputs, targets in train:
            with accelerator.accumulate(model):
                loss = F.cross_entropy(model(inputs), targets)
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
        model.eval()
        correct = 0
        with torch.no_grad():
            for inputs, targets in val:
                predictions, targets = accelerator.gather_for_metrics((model(inputs).argmax(1), targets))
                correct += int((predictions == targets).sum())
        accelerator.print(f"epoch {epoch}: validation accuracy {correct / len(val.dataset):.3f}")
    print(f"training time: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
