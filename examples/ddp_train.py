"""A plain DDP training script for torchrun - what trainspeed's doctor watches under a launch.

    torchrun --nproc-per-node 2 examples/ddp_train.py
    torchrun --nproc-per-node 2 -m trainspeed doctor examples/ddp_train.py
    torchrun --nproc-per-node 2 -m trainspeed doctor examples/ddp_train.py --slow-rank 1   # plant a straggler

Each rank trains a copy of an MLP on its own shard of a synthetic data set (DistributedSampler),
DDP all-reduces the gradients during backward. `--slow-rank R` makes rank R do extra work on the
host every step (a planted straggler); `--width` sets the model size (gradient bytes to reduce).
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--slow-rank", type=int, default=None)
    parser.add_argument("--slow-ms", type=float, default=5.0)
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")

    torch.manual_seed(0)
    x, y = torch.randn(4096, 64), torch.randint(0, 10, (4096,))
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=64, sampler=sampler)
    model = nn.Sequential(nn.Linear(64, args.width), nn.ReLU(), nn.Linear(args.width, args.width), nn.ReLU(),
                          nn.Linear(args.width, 10)).to(device)
    model = DDP(model, device_ids=[device.index] if cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for inputs, target in loader:
            inputs, target = inputs.to(device), target.to(device)
            loss = criterion(model(inputs), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if rank == args.slow_rank:
                end = time.perf_counter() + args.slow_ms / 1e3
                while time.perf_counter() < end:  # host work only this rank does
                    pass
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    dist.barrier()  # every rank done before the group goes
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
