"""Do the ranks train the same model? Checked once, before the first step, from a fingerprint.

Every rank sends (layout, checksum): the layout - parameter names, shapes and dtypes - must
agree, or DDP would fail later with an obscure size error (or, worse, train nonsense); the
checksum (sum of every parameter value in float64) may differ, since DDP broadcasts rank 0's
values at wrapping time, but the caller says so (different seeds per rank usually mean the
data shuffles differ too).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from trainspeed.errors import DistError


@dataclass(frozen=True)
class Fingerprint:
    layout: str
    """Hash of the parameters' names, shapes and dtypes."""
    params: int
    checksum: float
    first_name: str
    """Name and shape of the first parameter, for the message."""


def fingerprint(model: nn.Module) -> Fingerprint:
    named = list(model.named_parameters())
    text = ";".join(f"{n}:{tuple(p.shape)}:{p.dtype}" for n, p in named)
    with torch.no_grad():
        checksum = float(sum(p.detach().double().sum().item() for _, p in named))
    first = f"{named[0][0]} {tuple(named[0][1].shape)}" if named else "no parameters"
    return Fingerprint(hashlib.sha256(text.encode()).hexdigest()[:16], len(named), checksum, first)


def compare(prints: list[Fingerprint]) -> str | None:
    """None if every rank's values equal rank 0's; a note if only values differ; DistError if layouts differ."""
    ref = prints[0]
    for rank, fp in enumerate(prints[1:], start=1):
        if fp.layout != ref.layout:
            raise DistError(f"rank {rank}'s model differs from rank 0's ({fp.params} parameters, first {fp.first_name}; "
                            f"rank 0: {ref.params}, first {ref.first_name}): every rank must build the same model")
    differ = [rank for rank, fp in enumerate(prints) if fp.checksum != ref.checksum]
    if differ:
        return (f"initial parameters differed on rank(s) {', '.join(map(str, differ))} (parameter checksums): DDP "
                "broadcast rank 0's values to every rank; seed every rank alike if the data order should match too")
    return None


def check_same_model(model: nn.Module) -> str | None:
    """Gather every rank's fingerprint (one small collective); see `compare`."""
    prints: list[Fingerprint | None] = [None] * dist.get_world_size()
    dist.all_gather_object(prints, fingerprint(model))
    return compare([p for p in prints if p is not None])
