"""The whole hardware report: CPU, GPUs, and the software that drives them."""

from __future__ import annotations

import platform
from dataclasses import dataclass

from trainspeed._render import Renders
from trainspeed.hardware.cpu import CpuInfo, detect_cpu
from trainspeed.hardware.gpu import GpuScan, detect_gpus


@dataclass(frozen=True)
class HardwareReport(Renders):
    """What `trainspeed hw` reports."""

    cpu: CpuInfo
    gpu: GpuScan
    torch_version: str
    python_version: str
    os: str


def detect_hardware() -> HardwareReport:
    """Inspect this machine (no GPU work is launched; CUDA is queried only if present)."""
    import torch

    return HardwareReport(
        cpu=detect_cpu(), gpu=detect_gpus(), torch_version=torch.__version__,
        python_version=platform.python_version(), os=platform.platform(terse=True),
    )
