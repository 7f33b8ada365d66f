"""skorch's NeuralNetClassifier fitting an MLP on scikit-learn's digits, as a scikit-learn user writes it:
`net.fit(X, y)` with skorch's own validation split and its per-epoch callbacks.

    python examples/frameworks/skorch_net.py --max-epochs 3

Needs `pip install 'trainspeed[skorch]'`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from sklearn.datasets import load_digits
from skorch import NeuralNetClassifier
from torch import nn


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args()

    torch.manual_seed(0)
    digits = load_digits()
    x, y = (digits.data / 16).astype(np.float32), digits.target.astype(np.int64)
    net = NeuralNetClassifier(MLP, max_epochs=args.max_epochs, batch_size=args.batch_size, lr=1e-3,
                              optimizer=torch.optim.Adam, iterator_train__shuffle=True, verbose=0)
    start = time.perf_counter()
    net.fit(x, y)
    print(f"training time: {time.perf_counter() - start:.3f} s")
    print(f"epochs: {len(net.history)}, train batches: {sum(len(e['batches']) for e in net.history)}")


if __name__ == "__main__":
    main()
