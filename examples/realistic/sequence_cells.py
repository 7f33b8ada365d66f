"""A sequence classifier that steps a recurrent cell over time in Python (a realistic example, written for trainspeed,
not copied from one): sensor windows of `--length` steps and 16 channels, an `nn.LSTMCell` called once per time
step inside the model's forward (as tutorials that need the hidden state at each step write it), a linear head on
the last hidden state, Adam, the loss read every 50 steps.

The windows are made up from a fixed seed (nothing to download).

What it really does (the counts tests/test_realistic_examples.py checks): `--steps` optimizer steps on batches of
`--batch-size`; `--length` calls of the cell per step.

    python examples/realistic/sequence_cells.py [--steps 150] [--length 24] [--batch-size 32] [--fused]

`--fused` applies only the doctor's first action: the same model with `nn.LSTM(16, 64, batch_first=True)` run over
the whole window in one call; the same data, the same steps.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

FEATURES, HIDDEN, CLASSES = 16, 64, 4


class SteppedLSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(FEATURES, HIDDEN)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.shape[0], HIDDEN)
        c = torch.zeros_like(h)
        for t in range(x.shape[1]):
            h, c = self.cell(x[:, t], (h, c))
        return self.head(h)


class FusedLSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(FEATURES, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.rnn(x)
        return self.head(h[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--length", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--fused", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    windows = torch.randn(args.batch_size * 8, args.length, FEATURES)
    labels = (windows[:, -1, :4].argmax(1) + windows[:, 0, 4:8].argmax(1)) % CLASSES
    model = FusedLSTM() if args.fused else SteppedLSTM()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    start = time.perf_counter()
    for step in range(args.steps):
        i = (step % 8) * args.batch_size
        x, y = windows[i:i + args.batch_size], labels[i:i + args.batch_size]
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 49:
            print(f"step {step + 1}: loss {loss.item():.4f}")
    print(f"training time: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
