"""A job run by the distributed tests, one process per rank: `python ddp_job.py MODE OUT_JSON`.

Modes: fit (trainspeed.fit on the Iris-sized job), grads (the seed's principle by hand: DDP
gradients of 1/K of a batch against one process on the whole batch), crash (rank 1 dies after a
few steps), mismatch (rank 1 builds a wider model), losses (a plain DDP loop writing its losses,
for the doctor to watch; optionally with a planted straggler).
"""

from __future__ import annotations

import copy
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

import trainspeed
from trainspeed.distributed.env import destroy_group
from trainspeed.distributed.shard import loss_weight, shard_rows


def data(rows: int = 120) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(rows, 4, generator=g), torch.randint(0, 3, (rows,), generator=g)


def model(width: int = 10) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 3))


def write(path: str, result: dict) -> None:
    if int(os.environ.get("RANK", "0")) == 0:
        with open(path, "w") as f:
            json.dump(result, f)


def close() -> None:
    """Tear the group down as fit does (callers drop DDP first)."""
    destroy_group(barrier=True)


def run_fit(out: str, batch_size: int | None, epochs: int) -> None:
    m = model()
    x, y = data()
    r = trainspeed.fit(m, (x, y), nn.CrossEntropyLoss(), torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                       epochs=epochs, batch_size=batch_size)
    write(out, {"losses": r.losses, "params": [p.detach().flatten().tolist() for p in m.parameters()],
                "strategy": r.strategy.name, "explain": r.strategy.explain})


def run_grads(out: str, rows: int) -> None:
    """K ranks each on their rows of one batch, DDP's all-reduce; rank 0 compares with the whole batch."""
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    m = model()
    whole = copy.deepcopy(m)
    x, y = data(rows)
    ddp = nn.parallel.DistributedDataParallel(m)
    start, stop = shard_rows(rows, rank, world)
    loss = nn.functional.cross_entropy(ddp(x[start:stop]), y[start:stop]) * loss_weight(rows, rank, world)
    loss.backward()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    opt.step()
    nn.functional.cross_entropy(whole(x), y).backward()
    torch.optim.SGD(whole.parameters(), lr=0.1).step()
    grad_diff = max((a.grad - b.grad).abs().max().item() for a, b in zip(m.parameters(), whole.parameters()))
    param_diff = max((a - b).abs().max().item() for a, b in zip(m.parameters(), whole.parameters()))
    grad_size = max(b.grad.abs().max().item() for b in whole.parameters())
    write(out, {"grad_diff": grad_diff, "param_diff": param_diff, "grad_size": grad_size, "world": world})
    del ddp  # its reducer goes before the group
    close()


def run_crash(out: str) -> None:
    m = model()
    x, y = data()
    rank = int(os.environ["RANK"])
    steps = {"n": 0}

    def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        steps["n"] += 1
        if rank == 1 and steps["n"] == 5:
            os._exit(3)  # a rank dies mid-run, without a word to the others
        return nn.functional.cross_entropy(output, target)

    trainspeed.fit(m, (x, y), loss_fn, torch.optim.SGD(m.parameters(), lr=0.1), epochs=1000)


def run_mismatch(out: str) -> None:
    m = model(10 if int(os.environ["RANK"]) == 0 else 12)
    x, y = data()
    trainspeed.fit(m, (x, y), nn.CrossEntropyLoss(), torch.optim.SGD(m.parameters(), lr=0.1), epochs=3)


def run_losses(out: str, steps: int, slow_rank: int | None) -> None:
    """A plain user DDP loop (the doctor watches it unchanged); rank 0 writes every step's loss."""
    import time

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    m = nn.parallel.DistributedDataParallel(model(64))
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x, y = data(256)
    start, stop = shard_rows(256, rank, dist.get_world_size())
    losses = []
    for step in range(steps):
        rows = slice(start + step % 4, stop)
        loss = nn.functional.cross_entropy(m(x[rows]), y[rows])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if rank == slow_rank:
            end = time.perf_counter() + 0.004
            while time.perf_counter() < end:
                pass
    write(out, {"losses": losses})
    del m  # the DDP wrapper and its reducer go before the group
    close()


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "fit":
        run_fit(out, int(sys.argv[3]) if sys.argv[3] != "none" else None, int(sys.argv[4]))
    elif mode == "grads":
        run_grads(out, int(sys.argv[3]))
    elif mode == "crash":
        run_crash(out)
    elif mode == "mismatch":
        run_mismatch(out)
    elif mode == "losses":
        run_losses(out, int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else None)
