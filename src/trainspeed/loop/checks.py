"""Checks of fit's arguments; each failure is one FitError naming the problem and the fix."""

from __future__ import annotations

import torch
from torch import nn

from trainspeed.amp import AMP_DTYPES
from trainspeed.errors import FitError
from trainspeed.loop.data import describe


def positive_int(name: str, value: object, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        extra = " or None" if allow_none else ""
        raise FitError(f"{name} must be a positive integer{extra}; got {value!r}")


def check_parts(model: object, loss_fn: object, optimizer: object, amp: object) -> None:
    if not isinstance(model, nn.Module):
        raise FitError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    if not callable(loss_fn):
        raise FitError(f"loss_fn must be callable as loss_fn(output, target); got {type(loss_fn).__name__}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise FitError(f"optimizer must be a torch.optim.Optimizer; got {type(optimizer).__name__}")
    if amp not in (None, *AMP_DTYPES):
        raise FitError(f"amp must be None, 'bf16' or 'fp16'; got {amp!r}")
    check_owner(model, optimizer)


def check_owner(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """The optimizer must update this model's parameters and nothing else."""
    own = {id(p) for p in model.parameters()}
    held = [p for group in optimizer.param_groups for p in group["params"]]
    foreign = [p for p in held if id(p) not in own]
    if foreign:
        raise FitError(
            f"the optimizer holds {len(foreign)} of its {len(held)} tensors that are not parameters of this model "
            f"(first: {describe(foreign[0])}); build it from model.parameters() of the model you pass "
            "(after any copy of the model)"
        )
    if not any(p.requires_grad for p in held):
        raise FitError("the optimizer holds no parameter that requires grad: nothing would train")


def model_device(model: nn.Module) -> torch.device:
    devices = {p.device for p in model.parameters()} | {b.device for b in model.buffers()}
    if len(devices) > 1:
        raise FitError("the model is spread over several devices (" + ", ".join(sorted(map(str, devices)))
                       + "); fit trains a model that lives on one device")
    return devices.pop() if devices else torch.device("cpu")


def resolve_device(device: object, model: nn.Module, data_device: torch.device | None) -> torch.device | None:
    """The explicit device, or None for "auto" (to be measured). Mixed devices under "auto" are an error."""
    where = model_device(model)
    if device == "auto":
        if data_device is not None and data_device != where:
            raise FitError(
                f"the model's parameters are on {where} but the data tensors are on {data_device}: "
                "put both on one device (model.to(...), tensor.to(...)), or pass device=... to let fit move both"
            )
        return where if where.type != "cpu" else None
    try:
        chosen = torch.device(device)  # type: ignore[call-overload]
    except (RuntimeError, TypeError):
        raise FitError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got {device!r}") from None
    if chosen.type == "cuda":
        if not torch.cuda.is_available():
            raise FitError(f"device={device!r} but this PyTorch sees no CUDA device")
        index = chosen.index or 0
        if index >= torch.cuda.device_count():
            raise FitError(f"device={device!r} but only {torch.cuda.device_count()} CUDA device(s) are visible")
        chosen = torch.device("cuda", index)
    elif chosen.type != "cpu":
        raise FitError(f"device {device!r} is not supported by fit (cpu or cuda)")
    return chosen


def check_loss(loss: object) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor):
        raise FitError(f"loss_fn must return a tensor; it returned {type(loss).__name__}")
    if loss.numel() != 1:
        raise FitError(f"loss_fn must return a scalar; it returned shape {tuple(loss.shape)} "
                       "(use reduction='mean' or 'sum')")
    if not loss.requires_grad:
        raise FitError("the loss does not require grad: no parameter of the model reaches it")
    return loss
