"""What the doctor's input_bound advice buys, measured: DataLoader workers, torch's threads, batches taken whole.

    python benchmarks/loader_fixes.py                # both loops, 5 rounds
    python benchmarks/loader_fixes.py --loops rows --rounds 8 --batch 64

Two of examples/'s planted loops, each arm a way to feed the same model, alternated round by round
in one process (the arms meet the machine's slow moments alike), timed over whole passes of the
loader (`rows`: one epoch, 79 steps of `--batch` 256 rows, the example's default since 2026-11-23;
313 steps of 64 before) or 100 steps (`heavy`), the first batch left out:
- `rows` (examples/tensor_dataset_loader.py): a TensorDataset batched row by row, as given; the
  same with 2 worker processes; the batch taken whole by a BatchSampler; the tensors indexed by hand.
- `heavy` (examples/slow_dataloader.py): NumPy work per item, no workers; 2 workers beside torch's
  own threads; 2 workers with torch.set_num_threads(1).
Each arm's median ms per step, and its speed-up against the first arm by the median of the round
by round ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from bench_common import measured_on  # noqa: E402
from slow_dataloader import AugmentedImages  # noqa: E402

from trainspeed.hardware import detect_hardware  # noqa: E402

Arm = Callable[[], float]


def _timed(batches: Iterable[Any], step: Callable[[Any], None], limit: int | None = None) -> float:
    """ms per step over `batches` after the first one (at most `limit` steps)."""
    it = iter(batches)
    step(next(it))
    n, t0 = 0, time.perf_counter()
    for batch in it:
        step(batch)
        n += 1
        if limit is not None and n == limit:
            break
    ms = (time.perf_counter() - t0) / n * 1e3
    del it  # stops a pass's workers
    return ms


def rows_arms(size: int) -> dict[str, Arm]:
    torch.manual_seed(0)
    x = torch.randn(20000, 64)
    y = (x[:, 0] + x[:, 1] > 0).long()
    data = TensorDataset(x, y)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    def step(batch: Any) -> None:
        loss = nn.functional.cross_entropy(model(batch[0]), batch[1])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss.item()

    def by_hand() -> Iterable[Any]:
        perm = torch.randperm(len(x))
        for i in range(0, len(x), size):
            idx = perm[i:i + size]
            yield x[idx], y[idx]

    rows = DataLoader(data, batch_size=size, shuffle=True)
    workers = DataLoader(data, batch_size=size, shuffle=True, num_workers=2, persistent_workers=True)
    whole = DataLoader(data, batch_size=None, sampler=BatchSampler(RandomSampler(data), size, drop_last=False))
    return {"row by row (as given)": lambda: _timed(rows, step),
            "row by row, num_workers=2": lambda: _timed(workers, step),
            "whole, BatchSampler": lambda: _timed(whole, step),
            "whole, indexed by hand": lambda: _timed(by_hand(), step)}


def heavy_arms() -> dict[str, Arm]:
    torch.manual_seed(0)
    data = AugmentedImages()
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 48 * 48, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    threads = torch.get_num_threads()

    def step(batch: Any) -> None:
        loss = nn.functional.cross_entropy(model(batch[0]), batch[1])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def run(workers: int, torch_threads: int) -> float:
        torch.set_num_threads(torch_threads)
        try:
            loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=workers)
            return _timed(loader, step, limit=100)
        finally:
            torch.set_num_threads(threads)

    return {f"num_workers=0 ({threads} torch threads)": lambda: run(0, threads),
            f"num_workers=2 ({threads} torch threads)": lambda: run(2, threads),
            "num_workers=2, torch.set_num_threads(1)": lambda: run(2, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default="rows,heavy")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=256, help="the rows loop's batch (examples/tensor_dataset_loader.py)")
    args = parser.parse_args()
    makers = {"rows": lambda: rows_arms(args.batch), "heavy": heavy_arms}
    loops = [name.strip() for name in args.loops.split(",")]
    if args.rounds < 1 or args.batch < 1 or not loops or any(name not in makers for name in loops):
        parser.exit(2, f"loader_fixes.py: --loops takes {', '.join(makers)}; --rounds and --batch at least 1\n")
    hw = detect_hardware()
    print(f"{measured_on(hw)}; torch {hw.torch_version}; {args.rounds} rounds.")
    for name in loops:
        arms = makers[name]()
        times: dict[str, list[float]] = {arm: [] for arm in arms}
        for _ in range(args.rounds):
            for arm, run in arms.items():
                times[arm].append(run())
        base = next(iter(times.values()))
        print(f"\n| `{name}` arm | median ms per step | speed-up vs the first arm, round by round median [range] |")
        print("|---|---:|---|")
        for arm, ms in times.items():
            ratios = [b / a for a, b in zip(ms, base)]
            print(f"| {arm} | {statistics.median(ms):.3f} | {statistics.median(ratios):.2f}x "
                  f"[{min(ratios):.2f}x, {max(ratios):.2f}x] |")


if __name__ == "__main__":
    main()
