"""Whether the training calls run under torch.autocast, and in which dtype: the doctor does not advise what the
script does already."""

from __future__ import annotations

import torch


def autocast_dtype(device_type: str) -> str | None:
    """The dtype torch.autocast casts to on `device_type` ("cpu", "cuda") where it is on now ("bfloat16"), else
    None. torch 2.4 asks by device type; torch 2.3 has a pair of functions for the CPU and one for CUDA."""
    try:
        if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4
            on, dtype = torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)
        elif device_type == "cpu":
            on, dtype = torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()
        elif device_type == "cuda":
            on, dtype = torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()
        else:
            return None
    except (RuntimeError, TypeError):  # a device type autocast does not know
        return None
    return str(dtype).removeprefix("torch.") if on else None
