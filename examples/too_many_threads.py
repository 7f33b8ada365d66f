"""Planted bottleneck: torch given four times as many intra-op threads as the machine has cores.

A script tuned on a bigger machine (or `torch.set_num_threads(os.cpu_count() * 4)` "to be safe") runs
each matmul's threads in turns on the cores it has: a parallel op waits for its last thread to get a
core. `trainspeed doctor` should say thread_oversubscription and predict what the cores' count of
threads buys; `--threads N` runs it with N threads instead.
"""

import argparse
import os

import torch
from torch import nn


def cores() -> int:
    """This process's cores (its affinity where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def train(steps: int, threads: int) -> float:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x, y = torch.randn(512, 256), torch.randint(0, 10, (512,))
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--threads", type=int, default=4 * cores(), help="torch's intra-op threads")
    args = parser.parse_args()
    print(f"{args.threads} threads on {cores()} cores: final loss {train(args.steps, args.threads):.4f}")


if __name__ == "__main__":
    main()
