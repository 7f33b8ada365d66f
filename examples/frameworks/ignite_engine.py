"""PyTorch-Ignite's Engine training an MLP on scikit-learn's digits, as Ignite's examples write it:
`create_supervised_trainer`, an evaluator run by an event handler every N iterations, and a ProgressBar-free
log of the loss.

    python examples/frameworks/ignite_engine.py --epochs 3 --eval-every 20

Needs `pip install 'trainspeed[ignite]'`.
"""

from __future__ import annotations

import argparse
import time

import torch
from ignite.engine import Events, create_supervised_evaluator, create_supervised_trainer
from ignite.metrics import Accuracy, Loss
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-every", type=int, default=0, help="iterations between evaluations (0: each epoch's end)")
    args = p.parse_args()

    torch.manual_seed(0)
    digits = load_digits()
    x, y = torch.tensor(digits.data, dtype=torch.float32) / 16, torch.tensor(digits.target)
    train = DataLoader(TensorDataset(x[:1500], y[:1500]), batch_size=args.batch_size, shuffle=True)
    val = DataLoader(TensorDataset(x[1500:], y[1500:]), batch_size=128)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    trainer = create_supervised_trainer(model, optimizer, loss_fn)
    evaluator = create_supervised_evaluator(model, metrics={"accuracy": Accuracy(), "loss": Loss(loss_fn)})

    when = Events.ITERATION_COMPLETED(every=args.eval_every) if args.eval_every else Events.EPOCH_COMPLETED

    @trainer.on(when)
    def evaluate(engine) -> None:  # type: ignore[no-untyped-def]
        evaluator.run(val)
        print(f"iteration {engine.state.iteration}: validation accuracy {evaluator.state.metrics['accuracy']:.3f}")

    start = time.perf_counter()
    trainer.run(train, max_epochs=args.epochs)
    print(f"training time: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
