"""Hardware facts: CPU generation and cores, GPU tier, generation, VRAM, peaks."""

from trainspeed.hardware.cpu import CpuInfo, detect_cpu
from trainspeed.hardware.gpu import GpuInfo, GpuScan, detect_gpus
from trainspeed.hardware.names import GpuProduct, parse_gpu_name
from trainspeed.hardware.report import HardwareReport, detect_hardware

__all__ = [
    "CpuInfo", "GpuInfo", "GpuProduct", "GpuScan", "HardwareReport",
    "detect_cpu", "detect_gpus", "detect_hardware", "parse_gpu_name",
]
