"""Data-parallel training on PyTorch's own engine: torchrun launches, torch.distributed + DDP run."""

from trainspeed.distributed.env import DistEnv, detect, init_group
from trainspeed.distributed.shard import shard_rows

__all__ = ["DistEnv", "detect", "init_group", "shard_rows"]
