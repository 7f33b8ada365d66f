"""A plain FSDP2 training script for torchrun - what trainspeed's doctor watches under a sharded launch.

    torchrun --nproc-per-node 2 examples/fsdp_train.py
    torchrun --nproc-per-node 2 -m trainspeed doctor examples/fsdp_train.py
    torchrun --nproc-per-node 2 -m trainspeed doctor examples/fsdp_train.py --blocks-per-unit 8

A deep, thin residual MLP (`--depth` blocks of `--width`) is sharded with `fully_shard`: every
`--blocks-per-unit` consecutive blocks form one sharding unit (1: one unit per layer, the planted
case: many small all-gathers and reduce-scatters whose fixed cost the step waits for), then the
root. `--no-reshard` keeps each unit's gathered parameters from forward to backward
(`reshard_after_forward=False`: no second all-gather in backward, more memory). Each rank trains on
its own shard of a synthetic data set (DistributedSampler); `--times PATH` writes the median step
of the timed epochs, as the script's own clock reads it, and `--losses PATH` rank 0's loss at every step.
"""

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.linear = nn.Linear(width, width)

    def forward(self, x):
        return x + torch.relu(self.linear(self.norm(x)))


class Units(nn.Module):
    """`blocks` consecutive blocks: one sharding unit."""

    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x):
        return self.blocks(x)


class DeepMLP(nn.Module):
    def __init__(self, width, depth, per_unit):
        super().__init__()
        self.inp = nn.Linear(32, width)
        blocks = [Block(width) for _ in range(depth)]
        self.units = nn.ModuleList(Units(blocks[i:i + per_unit]) for i in range(0, depth, per_unit))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        x = self.inp(x)
        for unit in self.units:
            x = unit(x)
        return self.head(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--depth", type=int, default=32)
    parser.add_argument("--blocks-per-unit", type=int, default=1)
    parser.add_argument("--no-reshard", action="store_true")
    parser.add_argument("--times", default=None)
    parser.add_argument("--losses", default=None)
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")

    torch.manual_seed(0)
    x, y = torch.randn(4096, 32), torch.randint(0, 10, (4096,))
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=64, sampler=sampler)
    model = DeepMLP(args.width, args.depth, args.blocks_per_unit).to(device)
    reshard = not args.no_reshard
    for unit in model.units:
        fully_shard(unit, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
    criterion = nn.CrossEntropyLoss()

    steps, losses = [], []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for inputs, target in loader:
            start = time.perf_counter()
            inputs, target = inputs.to(device), target.to(device)
            loss = criterion(model(inputs), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.losses:
                losses.append(loss.item())
            if epoch:
                steps.append(time.perf_counter() - start)
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    if args.times and rank == 0:
        with open(args.times, "w") as f:
            json.dump({"median_step_ms": statistics.median(steps) * 1e3, "steps": len(steps)}, f)
    if args.losses and rank == 0:
        with open(args.losses, "w") as f:
            json.dump(losses, f)
    dist.barrier()  # every rank done before the group goes
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
