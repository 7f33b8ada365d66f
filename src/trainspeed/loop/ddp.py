"""`fit` under torchrun: DDP over the process group torchrun describes, each rank on 1/K of each batch.

Resident data: every rank holds the tensors and takes its contiguous 1/K of every batch (the
same batches on every rank: shuffles draw from one generator seeded alike on all ranks). Data
from a DataLoader: the loader is rebuilt around a DistributedSampler (per-rank batches of
batch_size/K, its own shuffle per epoch). Losses are recorded per rank as their share of the
batch's mean and summed over ranks once, at the end: one all-reduce for the whole history.
"""

from __future__ import annotations

import dataclasses
import gc
import math
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from trainspeed.distributed.checks import check_same_model
from trainspeed.distributed.env import DistEnv, destroy_group, detect, device_for, init_group
from trainspeed.distributed.shard import loss_weight, shard_rows
from trainspeed.errors import DistError, FitError, first_line
from trainspeed.loop.checks import resolve_device
from trainspeed.loop.data import TrainData


class DataParallel:
    """The distributed side of one `fit` job."""

    def __init__(self, env: DistEnv) -> None:
        self.env = env
        self.created = False
        self.seed = 0
        self.ddp: DistributedDataParallel | None = None

    @staticmethod
    def detect(distributed: bool | str) -> DataParallel | None:
        if distributed not in ("auto", True, False):
            raise FitError(f"distributed must be 'auto', True or False; got {distributed!r}")
        if distributed is False:
            return None
        env = detect()
        if env is None:
            if distributed is True:
                raise FitError("distributed=True but no launcher set WORLD_SIZE: run the script under torchrun")
            return None
        return DataParallel(env)

    def device_for(self, device: object, model: nn.Module) -> torch.device:
        """cuda:LOCAL_RANK when the job is on CUDA (asked, or "auto" with CUDA visible), else the CPU."""
        if device == "auto":
            kind = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            chosen = resolve_device(device, model, None)
            kind = chosen.type if chosen is not None else "cpu"
        return device_for(self.env, kind)

    def start(self, model: nn.Module, explain: list[str]) -> nn.Module:
        """Form the group, check every rank has the same model, agree on a data seed; the DDP wrapper."""
        device = next(model.parameters()).device
        self.created = init_group(self.env, device)
        try:
            note = check_same_model(model)
            # one data order for every rank: rank 0's initial seed (torch's RNG is left untouched)
            seed = torch.tensor([torch.initial_seed() % 2**62], dtype=torch.int64, device=device)
            dist.broadcast(seed, src=0)
            self.seed = int(seed.item())
        except DistError:
            self.finish(barrier=False)
            raise
        except RuntimeError as e:
            self.failed(e)
        ddp = self.ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        backend = dist.get_backend()
        explain.append(f"data-parallel: rank {self.env.rank} of {self.env.world_size} ({backend}, DDP), each rank on "
                       f"1/{self.env.world_size} of every batch; gradients all-reduced during backward")
        if note:
            explain.append(note)
        return ddp

    def shard_data(self, data: TrainData) -> TrainData:
        if data.loader is None:
            gen = torch.Generator(device=data.device)
            gen.manual_seed(self.seed)
            if data.batch_size < self.env.world_size:
                raise FitError(f"batch_size {data.batch_size} is smaller than the {self.env.world_size} ranks: "
                               "every rank needs at least one row of each batch")
            return dataclasses.replace(data, generator=gen)
        loader = data.loader
        world = self.env.world_size
        per_rank = max(1, math.ceil(data.batch_size / world))
        sampler: DistributedSampler[Any] = DistributedSampler(loader.dataset, num_replicas=world,
                                                              rank=self.env.rank,
                                     shuffle=data.shuffle, seed=self.seed % 2**31)
        rebuilt = DataLoader(loader.dataset, batch_size=per_rank, sampler=sampler, num_workers=loader.num_workers,
                             collate_fn=loader.collate_fn, pin_memory=loader.pin_memory, drop_last=loader.drop_last,
                             persistent_workers=loader.persistent_workers if loader.num_workers else False)
        return dataclasses.replace(data, loader=rebuilt, batch_size=per_rank, sampler=sampler)

    def rows(self, inputs: tuple[torch.Tensor, ...], target: torch.Tensor
             ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, float, float]:
        """This rank's rows of a batch, the weight on its loss, and its share of the batch."""
        n = target.shape[0]
        start, stop = shard_rows(n, self.env.rank, self.env.world_size)
        if stop == start:  # fewer rows than ranks: take part in the all-reduce with a zero weight
            return tuple(t[:1] for t in inputs), target[:1], 0.0, 0.0
        return (tuple(t[start:stop] for t in inputs), target[start:stop],
                loss_weight(n, self.env.rank, self.env.world_size), (stop - start) / n)

    def sum_losses(self, losses: torch.Tensor) -> None:
        dist.all_reduce(losses)

    def failed(self, error: BaseException) -> None:
        """A collective failed mid-run: one clear line (the group is torn down so nothing waits on it)."""
        first = first_line(error)
        self.finish(barrier=False)
        raise DistError(f"rank {self.env.rank} of {self.env.world_size}: a collective with the other ranks failed "
                        f"(did another rank crash or stop?): {first}") from None

    def finish(self, barrier: bool = True) -> None:
        """Let go of DDP (its reducer's hooks leave the model's parameters with it), then of the group
        if `fit` formed it - after a barrier, so that no rank tears it down under another."""
        self.ddp = None
        if self.created:
            self.created = False
            destroy_group(barrier)
        else:
            gc.collect()  # the user's group stays; DDP's reducer goes now
