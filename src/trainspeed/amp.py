"""Mixed precision, as every part of the project applies it: the dtypes `--amp` names, the autocast region, and
the optimizer step through a GradScaler (fp16) or without one."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch

from trainspeed.names import AMP_NAMES

AMP_DTYPES = {name: getattr(torch, dtype) for name, dtype in AMP_NAMES.items()}


def amp_context(device_type: str, amp: str | None) -> Any:
    """torch.autocast to `amp`'s dtype on `device_type`; a null context for None (float32)."""
    if amp is None:
        return nullcontext()
    return torch.autocast(device_type=device_type, dtype=AMP_DTYPES[amp])


def optimizer_step(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> None:
    """One optimizer step: through the GradScaler where there is one (it skips a step whose gradients overflowed
    and adjusts its scale), else plain."""
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
