"""Where this process stands in a torchrun launch, and the process group it trains in.

torchrun (or any launcher following its convention) sets RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT; `detect()` reads them. `init_group()` forms the process group
from them - NCCL on CUDA, gloo on the CPU - with a timeout, so that a rendezvous nobody answers
or a peer that died ends in one clear error instead of a hang.
"""

from __future__ import annotations

import datetime
import gc
import os
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist

from trainspeed.errors import DistError, first_line

DEFAULT_TIMEOUT_S = 300.0
TIMEOUT_ENV = "TRAINSPEED_DIST_TIMEOUT"
"""Seconds a rendezvous or a collective may wait for the other ranks (default 300)."""


@dataclass(frozen=True)
class DistEnv:
    rank: int
    local_rank: int
    world_size: int
    master_addr: str
    master_port: int

    @property
    def endpoint(self) -> str:
        return f"{self.master_addr}:{self.master_port}"


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = env.get(name)
    if text is None:
        if default is None:
            raise DistError(f"{name} is not set, but WORLD_SIZE is: launch with torchrun (it sets RANK, LOCAL_RANK, "
                            "WORLD_SIZE, MASTER_ADDR and MASTER_PORT)")
        return default
    try:
        return int(text)
    except ValueError:
        raise DistError(f"{name}={text!r} is not an integer") from None


def detect(env: Mapping[str, str] | None = None) -> DistEnv | None:
    """This process's place in a launch, or None when no launcher set WORLD_SIZE."""
    env = os.environ if env is None else env
    if "WORLD_SIZE" not in env:
        return None
    world = _int(env, "WORLD_SIZE")
    rank = _int(env, "RANK")
    local = _int(env, "LOCAL_RANK", default=rank)
    if world < 1 or not 0 <= rank < world:
        raise DistError(f"RANK={rank} does not fit WORLD_SIZE={world}")
    if not env.get("MASTER_ADDR") or not env.get("MASTER_PORT"):
        raise DistError(f"WORLD_SIZE={world} is set but MASTER_ADDR/MASTER_PORT are not: launch with torchrun, "
                        "or set the rendezvous address of rank 0")
    return DistEnv(rank, local, world, env["MASTER_ADDR"], _int(env, "MASTER_PORT"))


def timeout_s(env: Mapping[str, str] | None = None) -> float:
    env = os.environ if env is None else env
    text = env.get(TIMEOUT_ENV)
    if text is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        raise DistError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds") from None
    if value <= 0:
        raise DistError(f"{TIMEOUT_ENV} must be positive; got {text}")
    return value


def device_for(env: DistEnv, device_type: str) -> torch.device:
    """This rank's device: cuda:LOCAL_RANK on CUDA (one GPU per process), else the CPU."""
    if device_type != "cuda":
        return torch.device("cpu")
    visible = torch.cuda.device_count()
    if env.local_rank >= visible:
        raise DistError(f"LOCAL_RANK={env.local_rank} needs a GPU of its own but only {visible} CUDA device(s) are "
                        f"visible: use --nproc-per-node {max(visible, 1)} (or fewer) on this node")
    return torch.device("cuda", env.local_rank)


def init_group(env: DistEnv, device: torch.device, timeout: float | None = None) -> bool:
    """Form the default process group (NCCL on CUDA, gloo on the CPU) unless one exists.

    True if this call formed it (the caller then destroys it when done). A rendezvous that does
    not complete within `timeout` seconds raises DistError naming the address.
    """
    if dist.is_initialized():
        return False
    seconds = timeout_s() if timeout is None else timeout
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    try:
        dist.init_process_group(backend, init_method=f"tcp://{env.endpoint}", rank=env.rank,
                                world_size=env.world_size, timeout=datetime.timedelta(seconds=seconds))
    except Exception as e:  # noqa: BLE001 - torch raises several types here, all meaning "no rendezvous"
        first = first_line(e)
        raise DistError(f"rank {env.rank} of {env.world_size} could not form the process group at {env.endpoint} "
                        f"within {seconds:g} s ({backend}): {first}. Is rank 0 running, the address reachable and the "
                        "port free?") from None
    return True


def destroy_group(barrier: bool = False) -> None:
    """Tear the default group down. Callers let go of their DDP models first; the collection here
    frees a DDP caught in a reference cycle (its reducer must go before the group, or gloo can abort
    the process at exit with "terminate called without an active exception"), and `barrier` waits
    for every rank so that none destroys the group under another."""
    gc.collect()
    if dist.is_initialized():
        if barrier:
            dist.barrier()
        dist.destroy_process_group()
