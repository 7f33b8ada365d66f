"""One rank's share of a data-parallel step, for the memory estimate: how its model and optimizer are sharded.

The step is replayed as that rank runs it, on fake tensors, with a fake process group of the world's size (the one
PyTorch's own tests use: its collectives return at once, their buffers allocated as the real ones are):

- `fsdp`, `fsdp-no-reshard`: FSDP2's own code (`torch.distributed.fsdp.fully_shard` on each block, then on the
  model, `reshard_after_forward` True or False; with `param_dtype`, its MixedPrecisionPolicy). Its sharded parameters, gradients and optimizer state, the
  all-gathered parameters and the collectives' buffers are what that code allocates.
- `ddp`: the single-device step, plus DistributedDataParallel's gradient buckets. DDP's reducer (C++) reads its
  tensors' data and cannot run on fake tensors, so the buckets are added by size: one flat copy of every gradient,
  held from DDP's construction on (`gradient_as_bucket_view=False`, its default).
- `zero1`: as `ddp`, with the optimizer's state only for this rank's partition of the parameters
  (ZeroRedundancyOptimizer's greedy split: parameters largest first, each to the rank holding the fewest bytes);
  the rank with the most state is the one estimated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from trainspeed.amp import AMP_DTYPES
from trainspeed.memory.checkpointing import blocks_of
from trainspeed.memory.tracker import local, round_up
from trainspeed.names import AMP_NAMES, SHARD_MODES

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

FSDP_MODES = ("fsdp", "fsdp-no-reshard")


@dataclass(frozen=True)
class Sharding:
    """How the step is spread over the world: `world_size` ranks, each sharded as `mode` (SHARD_MODES)."""

    world_size: int
    mode: str
    param_dtype: str | None = None
    """FSDP2's MixedPrecisionPolicy: the dtype ("bf16", "fp16") its units gather their parameters in and compute
    with, gradients reduced in float32; None: the parameters' own."""
    cpu_offload: bool = False
    """FSDP2's CPUOffloadPolicy: the shards, their gradients and the optimizer's state and step in host memory."""

    def __post_init__(self) -> None:
        if self.mode not in SHARD_MODES:
            raise ValueError(f"unknown shard mode {self.mode!r} (choose from {', '.join(SHARD_MODES)})")
        if self.world_size < 1:
            raise ValueError(f"the world size must be at least 1, got {self.world_size}")
        if self.param_dtype is not None and (self.param_dtype not in AMP_NAMES or not self.fsdp):
            raise ValueError(f"a parameter dtype ({self.param_dtype!r}) is FSDP2's mixed precision: bf16 or fp16, "
                             "with an fsdp mode")
        if self.cpu_offload and not self.fsdp:
            raise ValueError(f"CPU offload is FSDP2's (CPUOffloadPolicy): it needs an fsdp mode, not {self.mode!r}")

    @property
    def fsdp(self) -> bool:
        return self.mode in FSDP_MODES


class ShardingUnavailable(RuntimeError):
    """The sharded step cannot be replayed in this process."""


@contextlib.contextmanager
def fake_world(world_size: int) -> Iterator[DeviceMesh]:
    """A fake process group of `world_size` ranks (this process rank 0) and its device mesh, for the replay; the
    process group is destroyed after. A process that has one already (a script under torchrun) is refused."""
    import torch.distributed as dist

    if not dist.is_available():
        raise ShardingUnavailable("this build of torch has no torch.distributed: the sharded step cannot be replayed")
    if dist.is_initialized():
        raise ShardingUnavailable("a process group exists in this process already (under torchrun?): the sharded "
                                  "estimate runs in a process of its own")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=0, world_size=world_size, store=FakeStore())
    try:
        yield init_device_mesh("cpu", (world_size,))  # built outside the fake mode: the mesh reads its ranks
    finally:
        dist.destroy_process_group()


def shard_units(model: nn.Module) -> list[nn.Module]:
    """The modules FSDP wraps one by one, as training scripts do: the model's repeated blocks (`blocks_of`, as
    activation checkpointing takes them) that hold parameters."""
    return [m for m in blocks_of(model) if any(True for _ in m.parameters())]


def shard_fsdp(model: nn.Module, mesh: DeviceMesh, sharding: Sharding) -> int:
    """FSDP2 on each unit of `model` (`shard_units`), then on the model itself (its other parameters: embeddings,
    a head), with `sharding`'s MixedPrecisionPolicy. Returns the number of units."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    reshard = sharding.mode == "fsdp"
    policy = MixedPrecisionPolicy(param_dtype=AMP_DTYPES[sharding.param_dtype],
                                  reduce_dtype=torch.float32) if sharding.param_dtype else MixedPrecisionPolicy()
    units = shard_units(model)
    for block in units:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    return len(units) + 1


def on_local_shards(factory: Callable[[list[nn.Parameter]], torch.optim.Optimizer],
                    params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """The optimizer over FSDP2's parameters, replayed on their local shards: the same updates on the same storages
    (a DTensor's foreach or per-tensor update runs its local tensors' ops), without DTensor's sharding propagation for
    each op, which for a foreach update of hundreds of parameters took a third of a 70B shape's estimate. Before each
    step the local shards are handed their DTensor gradients' local shards (a step pre-hook): no storage is made or
    copied. The model's zero_grad clears the DTensor gradients, the optimizer's the shards'."""
    shards = [local(p) for p in params]  # a DTensor's local shard itself, not a view through to_local
    optimizer = factory(shards)  # type: ignore[arg-type]

    def grads(*_: object) -> None:
        for p, shard in zip(params, shards):
            if shard is not p:
                shard.grad = local(p.grad) if p.grad is not None else None

    optimizer.register_step_pre_hook(grads)
    return optimizer


def zero1_partition(params: list[nn.Parameter], world_size: int) -> list[nn.Parameter]:
    """The parameters whose optimizer state the busiest rank holds under ZeroRedundancyOptimizer: its greedy
    split (sorted by size, largest first, each to the rank holding the fewest bytes so far)."""
    ranks: list[list[nn.Parameter]] = [[] for _ in range(world_size)]
    sizes = [0] * world_size
    for p in sorted(params, key=lambda p: p.numel(), reverse=True):
        rank = sizes.index(min(sizes))
        ranks[rank].append(p)
        sizes[rank] += p.numel() * p.element_size()
    return ranks[sizes.index(max(sizes))]


def bucket_bytes(params: list[nn.Parameter], quantum: int) -> int:
    """DDP's gradient buckets: a flat tensor per bucket of its parameters' gradients (`bucket_cap_mb` 25, the first
    bucket 1 MiB, per dtype), each rounded to the allocator's `quantum`."""
    import torch.distributed as dist

    trainable: list[torch.Tensor] = [p for p in params if p.requires_grad]
    if not trainable:
        return 0
    caps = [dist._DEFAULT_FIRST_BUCKET_BYTES, 25 * 1024 * 1024]
    buckets, _ = dist._compute_bucket_assignment_by_size(trainable, caps)
    total = 0
    for indices in buckets:
        nbytes = sum(trainable[i].numel() * trainable[i].element_size() for i in indices)
        total += round_up(nbytes, quantum)
    return total
