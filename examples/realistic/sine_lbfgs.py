"""A time-series predictor trained the way the classic "predict a sine wave" examples do it (a realistic example,
written for trainspeed, not copied from one): `--waves` sine waves of `--length` samples in float64 (the model made
`.double()` to match), two `nn.LSTMCell`s stepped over time in Python (the model also runs on past the input to
predict `--future` more samples), LBFGS with a closure that zeroes the gradients, runs the model, prints the loss
and calls backward; after each optimizer step a prediction under `torch.no_grad()`, its loss printed and a
matplotlib figure of it saved.

The waves are made up from a fixed seed (nothing to download).

What it really does (the counts tests/test_realistic_examples.py checks): `--steps` optimizer steps; each runs the
closure up to `--max-iter` times (LBFGS stops early once its gradient or change is small), each closure `--length`
calls of each cell and one backward; after each step `--length + --future` calls of each cell under `no_grad` and
one figure saved to `--out-dir`.

    python examples/realistic/sine_lbfgs.py [--steps 6] [--length 400] [--future 400] [--waves 48] [--max-iter 8]
        [--float32] [--fused]

`--float32` applies only the dtype: the same waves, model and steps in float32. `--fused` applies only the stacked
cells' fusion: the same model (the cells' weights in one `nn.LSTM(1, 51, num_layers=2, batch_first=True)`) run over
the input in one call.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

HIDDEN = 51


class Sequence(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, HIDDEN)
        self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
        self.linear = nn.Linear(HIDDEN, 1)

    def forward(self, input: torch.Tensor, future: int = 0) -> torch.Tensor:
        outputs = []
        h_t = torch.zeros(input.size(0), HIDDEN, dtype=input.dtype)
        c_t = torch.zeros(input.size(0), HIDDEN, dtype=input.dtype)
        h_t2 = torch.zeros(input.size(0), HIDDEN, dtype=input.dtype)
        c_t2 = torch.zeros(input.size(0), HIDDEN, dtype=input.dtype)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):  # predicting the future: the last output fed back in
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


class FusedSequence(nn.Module):
    """`--fused`: the two stacked cells as one nn.LSTM(1, 51, num_layers=2, batch_first=True) over the input in one
    call, its weights the cells' (the same model as Sequence's from the same seed); the future still fed back one
    time step at a time, through the same layer."""

    def __init__(self, cells: Sequence) -> None:
        super().__init__()
        self.rnn = nn.LSTM(1, HIDDEN, num_layers=2, batch_first=True)
        with torch.no_grad():
            for layer, cell in enumerate((cells.lstm1, cells.lstm2)):
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(self.rnn, f"{name}_l{layer}").copy_(getattr(cell, name))
        self.linear = cells.linear

    def forward(self, input: torch.Tensor, future: int = 0) -> torch.Tensor:
        out, state = self.rnn(input.unsqueeze(-1))
        outputs = [self.linear(out).squeeze(-1)]
        output = outputs[0][:, -1:]
        for _ in range(future):  # predicting the future: the last output fed back in
            out, state = self.rnn(output.unsqueeze(-1), state)
            output = self.linear(out[:, -1])
            outputs += [output]
        return torch.cat(outputs, dim=1)


def waves(count: int, length: int, seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.arange(length) + rng.integers(-80, 80, count)[:, None]
    return np.sin(x / 20.0)  # float64, as numpy makes it


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--length", type=int, default=400)
    parser.add_argument("--future", type=int, default=400)
    parser.add_argument("--waves", type=int, default=48)
    parser.add_argument("--max-iter", type=int, default=8)
    parser.add_argument("--out-dir", type=Path, default=Path("."))
    parser.add_argument("--float32", action="store_true")
    parser.add_argument("--fused", action="store_true", help="the stacked cells as one nn.LSTM(num_layers=2) call")
    args = parser.parse_args()
    np.random.seed(0)
    torch.manual_seed(0)
    data = torch.from_numpy(waves(args.waves, args.length + 1))
    if args.float32:
        data = data.float()
    input, target = data[3:, :-1], data[3:, 1:]
    test_input, test_target = data[:3, :-1], data[:3, 1:]
    seq: nn.Module = Sequence()
    if args.fused:
        seq = FusedSequence(seq)
    if not args.float32:
        seq.double()
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=args.max_iter)
    start = time.perf_counter()
    for i in range(args.steps):
        print("STEP:", i)

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print("loss:", loss.item())
            loss.backward()
            return loss

        optimizer.step(closure)
        with torch.no_grad():  # the prediction, beyond the test input
            pred = seq(test_input, future=args.future)
            loss = criterion(pred[:, :-args.future], test_target)
            print("test loss:", loss.item())
            y = pred.detach().numpy()
        plt.figure(figsize=(30, 10))
        plt.title("Predict future values for time sequences")
        plt.xlabel("x")
        plt.ylabel("y")
        for row, color in zip(y, ("r", "g", "b")):
            plt.plot(np.arange(args.length), row[:args.length], color, linewidth=2.0)
            plt.plot(np.arange(args.length, args.length + args.future), row[args.length:], color + ":",
                     linewidth=2.0)
        plt.savefig(args.out_dir / f"predict{i}.png")
        plt.close()
    print(f"training time: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
