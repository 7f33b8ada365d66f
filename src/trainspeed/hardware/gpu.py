"""What GPUs this is: name, tier, generation, VRAM, peak rates, PCIe link, driver.

Facts come from torch.cuda (what PyTorch can use) and NVML (what the driver knows); either
may be absent, and then the report says so instead of failing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from trainspeed.hardware.names import GpuProduct, parse_gpu_name
from trainspeed.hardware.specs import (
    architecture_from_capability,
    lookup_spec,
    supports_bf16,
    supports_tf32,
)


@dataclass(frozen=True)
class PeakTflops:
    """Dense peak TFLOP/s from the spec table (None where unknown)."""

    fp32: float | None
    tf32: float | None
    bf16: float | None


@dataclass(frozen=True)
class GpuPeak:
    """A GPU's dense peak for one kind of matrix arithmetic, from the spec table (`hardware.specs`)."""

    gpu: str
    """The table's product name ("H100 SXM")."""
    math: str
    """Which peak: "bf16/fp16" (autocast or a half-precision model), "tf32" (float32 with TF32 allowed), "fp32"."""
    tflops: float
    tf32_tflops: float | None = None
    """With "fp32": the GPU's TF32 peak, where it has TF32 tensor cores (Ampere or later) that torch was not allowed
    to use; None otherwise."""


@dataclass(frozen=True)
class Pcie:
    """The PCIe link as NVML reports it now (it may downshift when idle)."""

    generation: int | None
    width: int | None


@dataclass(frozen=True)
class GpuInfo:
    """One NVIDIA GPU."""

    index: int
    name: str
    product: GpuProduct
    architecture: str | None
    compute_capability: str | None
    vram_total_bytes: int | None
    vram_free_bytes: int | None
    sm_count: int | None
    bf16: bool | None
    tf32: bool | None
    peak_tflops: PeakTflops
    memory_bandwidth_gbs: float | None
    spec_key: str
    spec_source: str | None
    pcie: Pcie
    driver: str | None
    cuda: str | None
    torch_usable: bool
    """False when the driver sees this GPU but this PyTorch build cannot use it (CPU-only build)."""


@dataclass(frozen=True)
class GpuScan:
    """All GPUs found, with a plain reason when none could be."""

    gpus: list[GpuInfo]
    cuda_available: bool
    nvml_available: bool
    note: str | None


def build_gpu_info(index: int, name: str, capability: tuple[int, int] | None, *,
                   vram_total: int | None, vram_free: int | None, sm_count: int | None,
                   pcie: Pcie, driver: str | None, cuda: str | None, torch_usable: bool) -> GpuInfo:
    """Combine raw device facts with the name parser and spec table (pure)."""
    product = parse_gpu_name(name)
    arch = architecture_from_capability(*capability) if capability else product.architecture
    key, spec = lookup_spec(product)
    return GpuInfo(
        index=index, name=name, product=product, architecture=arch or product.architecture,
        compute_capability=f"{capability[0]}.{capability[1]}" if capability else None,
        vram_total_bytes=vram_total, vram_free_bytes=vram_free, sm_count=sm_count,
        bf16=supports_bf16(capability[0]) if capability else None,
        tf32=supports_tf32(capability[0]) if capability else None,
        peak_tflops=PeakTflops(spec.fp32, spec.tf32, spec.bf16) if spec else PeakTflops(None, None, None),
        memory_bandwidth_gbs=spec.bandwidth_gbs if spec else None,
        spec_key=key, spec_source=spec.source if spec else None,
        pcie=pcie, driver=driver, cuda=cuda, torch_usable=torch_usable,
    )


def math_peak(gpu: GpuInfo, half: bool, tf32: bool) -> GpuPeak | None:
    """`gpu`'s peak for matrix products in half precision (`half`: bfloat16 or float16, under autocast or in the
    model's own dtype), else float32 on TF32 tensor cores where torch allows them (`tf32`), else plain float32.
    The FP16 dense tensor peak equals the BF16 one on the spec table's data-centre parts. None where the table
    lacks it."""
    peaks = gpu.peak_tflops
    for math, tflops in (("bf16/fp16", peaks.bf16 if half else None), ("tf32", peaks.tf32 if tf32 else None),
                         ("fp32", peaks.fp32)):
        if tflops:
            return GpuPeak(gpu.spec_key, math, tflops, peaks.tf32 or None if math == "fp32" else None)
    return None


@contextmanager
def _nvml() -> Iterator[Any]:
    """Yield the pynvml module initialised, or None when NVML is missing or fails."""
    try:
        import pynvml
    except ImportError:
        yield None
        return
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...: no NVML here
        yield None
        return
    try:
        yield pynvml
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _nvml_facts(nv: Any, handle: Any) -> dict[str, Any]:
    def ask(fn: str, *args: Any) -> Any:
        try:
            return getattr(nv, fn)(handle, *args)
        except Exception:  # a query not supported on this board: leave it unknown
            return None

    mem = ask("nvmlDeviceGetMemoryInfo")
    cap = ask("nvmlDeviceGetCudaComputeCapability")
    return {
        "name": ask("nvmlDeviceGetName"),
        "total": int(mem.total) if mem is not None else None,
        "free": int(mem.free) if mem is not None else None,
        "capability": tuple(cap) if cap else None,
        "pcie": Pcie(ask("nvmlDeviceGetCurrPcieLinkGeneration"), ask("nvmlDeviceGetCurrPcieLinkWidth")),
    }


def _nvml_driver(nv: Any) -> tuple[str | None, str | None]:
    try:
        driver = nv.nvmlSystemGetDriverVersion()
    except Exception:
        driver = None
    try:
        v = int(nv.nvmlSystemGetCudaDriverVersion())
        cuda = f"{v // 1000}.{(v % 1000) // 10}"
    except Exception:
        cuda = None
    return (driver.decode() if isinstance(driver, bytes) else driver), cuda


def _torch_handle(nv: Any, props: Any) -> Any:
    uuid = getattr(props, "uuid", None)
    if nv is None or uuid is None:
        return None
    text = str(uuid)
    for candidate in (text if text.startswith("GPU-") else f"GPU-{text}", text):
        try:
            return nv.nvmlDeviceGetHandleByUUID(candidate)
        except Exception:
            continue
    return None


def detect_gpus() -> GpuScan:
    """Find every NVIDIA GPU that PyTorch or the driver can see."""
    import torch

    cuda_ok = bool(torch.cuda.is_available())
    torch_cuda = torch.version.cuda
    with _nvml() as nv:
        driver, driver_cuda = _nvml_driver(nv) if nv is not None else (None, None)
        gpus: list[GpuInfo] = []
        if cuda_ok:
            for i in range(torch.cuda.device_count()):
                props = torch.cuda.get_device_properties(i)
                handle = _torch_handle(nv, props)
                facts = _nvml_facts(nv, handle) if handle is not None else {}
                free = facts.get("free")
                if free is None:
                    free, _ = torch.cuda.mem_get_info(i)
                gpus.append(build_gpu_info(
                    i, props.name, (props.major, props.minor),
                    vram_total=int(props.total_memory), vram_free=int(free),
                    sm_count=int(props.multi_processor_count),
                    pcie=facts.get("pcie", Pcie(None, None)), driver=driver,
                    cuda=torch_cuda or driver_cuda, torch_usable=True,
                ))
        elif nv is not None:
            for i in range(nv.nvmlDeviceGetCount()):
                facts = _nvml_facts(nv, nv.nvmlDeviceGetHandleByIndex(i))
                name = facts["name"]
                gpus.append(build_gpu_info(
                    i, name.decode() if isinstance(name, bytes) else str(name), facts["capability"],
                    vram_total=facts["total"], vram_free=facts["free"], sm_count=None,
                    pcie=facts["pcie"], driver=driver, cuda=driver_cuda, torch_usable=False,
                ))
    note = _note(cuda_ok, nv is not None, gpus, torch_cuda)
    return GpuScan(gpus=gpus, cuda_available=cuda_ok, nvml_available=nv is not None, note=note)


def _note(cuda_ok: bool, nvml_ok: bool, gpus: list[GpuInfo], torch_cuda: str | None) -> str | None:
    if cuda_ok and not nvml_ok:
        return "NVML is unavailable: PCIe link and driver version unknown."
    if not cuda_ok and gpus:
        build = "a CPU-only build" if torch_cuda is None else f"built for CUDA {torch_cuda}"
        return (f"The driver sees {len(gpus)} GPU(s), but this PyTorch ({build}) cannot use them: "
                "install a CUDA build of torch.")
    if not cuda_ok:
        why = "this PyTorch is a CPU-only build" if torch_cuda is None else "no CUDA device or driver was found"
        return f"No CUDA GPU: {why}; training runs on the CPU."
    return None
