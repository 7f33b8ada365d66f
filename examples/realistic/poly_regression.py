"""A polynomial fitted by a single linear layer the way the classic regression examples do it (a realistic example,
written for trainspeed, not copied from one): a target polynomial of degree `--degree` drawn at random, each step a
fresh batch of `--batch-size` points (`torch.randn`, their powers `torch.cat`-ed into features, the target's bias read
with `.item()`), `fc.zero_grad()`, the smooth L1 loss, its value read with `.item()`, backward and a hand-written
update (`param.add_(-lr * param.grad)` under `torch.no_grad()`, no optimizer object), in an endless `count(1)` loop
that stops once the loss falls under `--tolerance`; the loss and the fitted polynomial printed after it.

Unseeded as the public programs are, the number of steps changes from run to run; `--seed N` fixes it.

What it really does (the counts tests/test_realistic_examples.py checks): as many steps as it takes the loss to fall
under the tolerance (its own "steps" line says how many), each one forward of a 4 -> 1 linear layer on 32 points,
one backward and the update; two reads a step (the target's bias and the loss), no evaluation, no save.

    python examples/realistic/poly_regression.py [--degree 4] [--batch-size 32] [--lr 0.1] [--tolerance 1e-3]
"""

from __future__ import annotations

import argparse
import time
from itertools import count

import torch
import torch.nn.functional as F


def make_features(x: torch.Tensor, degree: int) -> torch.Tensor:
    """A matrix with columns [x, x^2, ..., x^degree]."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, degree + 1)], 1)


def poly_desc(w: torch.Tensor, b: torch.Tensor) -> str:
    """The polynomial as text."""
    terms = " ".join(f"{float(c):+.2f} x^{i}" for i, c in enumerate(w.detach().view(-1), 1))
    return f"y = {terms} {float(b.detach().view(-1)[0]):+.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description="polynomial regression with one linear layer")
    parser.add_argument("--degree", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--tolerance", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=None, help="fix the target and the batches (default: unseeded)")
    args = parser.parse_args()
    if args.seed is not None:
        torch.manual_seed(args.seed)

    w_target = torch.randn(args.degree, 1) * 5
    b_target = torch.randn(1) * 5

    def f(x: torch.Tensor) -> torch.Tensor:
        """The polynomial to approximate."""
        return x.mm(w_target) + b_target.item()

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        """A fresh batch of points and their targets."""
        x = make_features(torch.randn(args.batch_size), args.degree)
        return x, f(x)

    fc = torch.nn.Linear(args.degree, 1)
    start = time.perf_counter()
    for batch_idx in count(1):
        batch_x, batch_y = get_batch()
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        with torch.no_grad():
            for param in fc.parameters():
                param.add_(-args.lr * param.grad)
        if loss < args.tolerance:
            break
    print(f"training time: {time.perf_counter() - start:.3f} s")
    print(f"steps {batch_idx}")
    print(f"Loss: {loss:.6f} after {batch_idx} batches")
    print("==> Learned function:\t" + poly_desc(fc.weight, fc.bias))
    print("==> Actual function:\t" + poly_desc(w_target, b_target))


if __name__ == "__main__":
    main()
