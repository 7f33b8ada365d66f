"""One rank of a `world-size` trial, started by torchrun (never by hand).

    python -m torch.distributed.run --standalone --nproc-per-node K \\
        -m trainspeed.sweep.world_worker --workload SPEC --steps N --warmup W --out FILE

Every rank builds the sweep's plain loop (sweep.arm) around a DDP model and takes its share of
every batch - the seed's data parallelism: K ranks, each 1/K of the same global batch, so the
training is the one process's. After `--warmup` untimed steps the ranks meet at a barrier, run
`--steps` timed steps, synchronise their device and meet again: the trial's time is the slowest
rank's. Then all-reduces of the gradient's size and of one value are timed on their own (the
ring's bandwidth and its latency).
Rank 0 writes the numbers to `--out` (JSON, atomically); a rank that fails prints one line
starting with `trainspeed-world-worker:` on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from trainspeed._io import write_atomic
from trainspeed.diagnose.scaling import WORLD_SIZES
from trainspeed.distributed.env import destroy_group, detect, device_for, init_group
from trainspeed.distributed.shard import loss_weight, shard_rows
from trainspeed.errors import first_line
from trainspeed.sweep.arm import Arm, ArmConfig, synchronize
from trainspeed.workloads.catalog import resolve_workload
from trainspeed.workloads.workload import Workload

TAG = "trainspeed-world-worker:"
ALLREDUCE_REPEATS = 15
"""Timed all-reduces per size; the fastest is kept: on a shared machine a rank descheduled for a few
ms lands in some of them (tails of 10x the typical time were seen), and the model wants the
all-reduce's own cost."""


class RankArm(Arm):
    """The sweep's loop on one rank: DDP around the model, this rank's rows of every batch."""

    def __init__(self, workload: Workload, config: ArmConfig, rank: int, world: int) -> None:
        super().__init__(workload, config)
        self.rank, self.world = rank, world

    def _build_model(self) -> None:
        super()._build_model()
        ids = [self.device.index] if self.device.type == "cuda" else None
        self.ddp = DistributedDataParallel(self.model, device_ids=ids)
        self.forward = self.ddp

    def _build_data(self) -> None:
        super()._build_data()
        if self.batch < self.world:
            raise ValueError(f"a batch of {self.batch} rows cannot give each of {self.world} ranks a row")
        if self._loader is not None:  # a Dataset: each rank loads its own 1/K of the samples
            if self.batch % self.world:
                raise ValueError(f"batch {self.batch} does not split evenly over {self.world} ranks "
                                 "(a DistributedSampler feeds equal per-rank batches)")
            dataset = self._loader.dataset
            sampler: DistributedSampler[Any] = DistributedSampler(dataset, self.world, self.rank, shuffle=True, seed=0,
                                                                  drop_last=True)
            c = self.config
            self._loader = DataLoader(dataset, batch_size=self.batch // self.world, sampler=sampler, drop_last=True,
                                      num_workers=c.num_workers, pin_memory=c.pin_memory)
            self._iter = iter(self._loader)
            return
        self._rows = shard_rows(self.batch, self.rank, self.world)
        weight = loss_weight(self.batch, self.rank, self.world)
        if weight != 1.0:  # uneven shares: weighted so DDP's average is the whole batch's gradient
            plain = self.loss_fn
            self.loss_fn = lambda out, target: plain(out, target) * weight

    def _next(self) -> tuple[torch.Tensor, ...]:
        batch = super()._next()
        if self._loader is not None:
            return batch
        start, stop = self._rows
        return tuple(t[start:stop] for t in batch)

    def grad_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters() if p.requires_grad)


def _every_rank(seconds: float, device: torch.device) -> list[float]:
    """Every rank's value (a collective: all ranks call it)."""
    mine = torch.tensor([seconds], dtype=torch.float64, device=device)
    every = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    return [float(t.item()) for t in every]


def time_allreduce(numel: int, device: torch.device) -> float | None:
    """Seconds of an all-reduce of `numel` fp32 values (the fastest of ALLREDUCE_REPEATS), None on one rank."""
    if dist.get_world_size() < 2 or numel == 0:
        return None
    flat = torch.ones(numel, dtype=torch.float32, device=device)
    times = []
    for i in range(ALLREDUCE_REPEATS + 2):
        synchronize(device)
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(flat)
        synchronize(device)
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return min(times)


def per_rank_steps(workload: Workload, device: torch.device, batch: int, steps: int, warmup: int) -> dict[str, float]:
    """Milliseconds per step of one process (no DDP) on batch // K, for the world sizes K the
    scaling prediction covers: the compute each of K ranks, each on hardware like this one, does."""
    out: dict[str, float] = {}
    for k in WORLD_SIZES[1:]:
        if batch // k < 1:
            break
        arm = Arm(workload, ArmConfig(device=str(device), batch_size=batch // k))
        try:
            arm.build(warmup)
            seconds, _ = arm.run(steps)
        finally:
            arm.close()
        out[str(k)] = seconds / steps * 1e3
    return out


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    env = detect()
    if env is None:
        raise RuntimeError("not started by torchrun (RANK/WORLD_SIZE unset)")
    device = device_for(env, args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    formed = init_group(env, device)
    try:
        arm = RankArm(resolve_workload(args.workload), ArmConfig(device=str(device)), env.rank, env.world_size)
        setup = arm.build(args.warmup)
        seconds = None
        rank_s: list[float] = []
        if args.steps:
            synchronize(device)
            dist.barrier()
            t0 = time.perf_counter()
            own, _ = arm.run(args.steps)
            dist.barrier()
            seconds = time.perf_counter() - t0
            rank_s = _every_rank(own, device)
        grad_bytes = arm.grad_bytes()
        # the gradient's size (as fp32 values), and one value: its time is the ring's latency, the rest its bandwidth
        allreduce_s = time_allreduce(-(-grad_bytes // 4), device) if args.steps else None
        latency_s = time_allreduce(1, device) if args.steps else None
        arm.close()
        split = {}
        if args.split_steps and env.world_size == 1:
            split = per_rank_steps(arm.workload, device, arm.batch, args.split_steps, args.warmup)
        out = {"threads": torch.get_num_threads(), "batch": arm.batch, "first_step_s": setup.first_step_s,
               "warmup_step_s": setup.warmup_step_s, "seconds": seconds, "rank_seconds": rank_s,
               "grad_bytes": grad_bytes, "allreduce_s": allreduce_s, "allreduce_one_s": latency_s, "per_rank_ms": split}
        dist.barrier()  # every rank done (a failed rank skips it: the others must not wait for it)
        return out if env.rank == 0 else None
    finally:
        arm = None  # type: ignore[assignment]  # DDP goes before the group (destroy_group collects it)
        if formed:
            destroy_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="trainspeed.sweep.world_worker", description=__doc__.splitlines()[0])
    p.add_argument("--workload", required=True)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--steps", type=int, default=0, help="timed steps (0: build and warm up only)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--split-steps", type=int, default=0,
                   help="one rank only: also time this many steps of one process on batch/K for K = 2, 4 ... 64")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads per rank (0: torch's default)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    rank = os.environ.get("RANK", "?")
    try:
        out = run(args)
    except Exception as e:  # noqa: BLE001 - one line to the launching arm, which reports it
        print(f"{TAG} rank {rank}: {type(e).__name__}: {first_line(e)}", file=sys.stderr, flush=True)
        return 1
    if out is not None:
        write_atomic(args.out, json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
