"""GPU detection without a GPU: monkeypatched torch.cuda and a fake NVML module."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest
import torch

from trainspeed.hardware.gpu import GpuPeak, Pcie, build_gpu_info, detect_gpus, math_peak


class _NVMLError(Exception):
    pass


def _fake_nvml(devices: list[dict], fail_init: bool = False) -> types.ModuleType:
    nv = types.ModuleType("pynvml")

    def init() -> None:
        if fail_init:
            raise _NVMLError("NVML Shared Library Not Found")

    @dataclass
    class Mem:
        total: int
        free: int

    by_uuid = {d["uuid"]: i for i, d in enumerate(devices)}
    nv.nvmlInit = init
    nv.nvmlShutdown = lambda: None
    nv.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    nv.nvmlSystemGetCudaDriverVersion = lambda: 12040
    nv.nvmlDeviceGetCount = lambda: len(devices)
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetHandleByUUID = lambda u: by_uuid[u]
    nv.nvmlDeviceGetName = lambda h: devices[h]["name"]
    nv.nvmlDeviceGetMemoryInfo = lambda h: Mem(devices[h]["total"], devices[h]["free"])
    nv.nvmlDeviceGetCudaComputeCapability = lambda h: devices[h]["cc"]
    nv.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: 5
    nv.nvmlDeviceGetCurrPcieLinkWidth = lambda h: 16
    return nv


H100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1234", "total": 85 * 2**30, "free": 80 * 2**30, "cc": (9, 0)}


def test_build_gpu_info_fills_product_arch_and_peaks() -> None:
    g = build_gpu_info(0, "NVIDIA H100 80GB HBM3", (9, 0), vram_total=80 * 2**30, vram_free=79 * 2**30,
                       sm_count=132, pcie=Pcie(5, 16), driver="550", cuda="12.4", torch_usable=True)
    assert g.architecture == "Hopper" and g.compute_capability == "9.0"
    assert g.bf16 and g.tf32
    assert g.peak_tflops.bf16 == 989.5 and g.memory_bandwidth_gbs == 3350
    assert g.product.form_factor == "SXM" and g.spec_source


def test_build_gpu_info_turing_has_no_bf16() -> None:
    g = build_gpu_info(0, "Tesla T4", (7, 5), vram_total=None, vram_free=None, sm_count=40,
                       pcie=Pcie(None, None), driver=None, cuda=None, torch_usable=True)
    assert g.architecture == "Turing" and g.bf16 is False and g.peak_tflops.fp32 == 8.1


def test_math_peak_follows_the_run_s_arithmetic() -> None:
    h100 = build_gpu_info(0, "NVIDIA H100 80GB HBM3", (9, 0), vram_total=None, vram_free=None, sm_count=132,
                          pcie=Pcie(None, None), driver=None, cuda=None, torch_usable=True)
    assert math_peak(h100, half=True, tf32=False) == GpuPeak("H100 SXM", "bf16/fp16", 989.5)
    assert math_peak(h100, half=False, tf32=True) == GpuPeak("H100 SXM", "tf32", 494.5)
    assert math_peak(h100, half=False, tf32=False) == GpuPeak("H100 SXM", "fp32", 67, tf32_tflops=494.5)
    # a Turing card has no bf16 or tf32 peak in the table: its float32 peak, whatever the run asked for
    t4 = build_gpu_info(0, "Tesla T4", (7, 5), vram_total=None, vram_free=None, sm_count=40,
                        pcie=Pcie(None, None), driver=None, cuda=None, torch_usable=True)
    peak = math_peak(t4, half=True, tf32=True)
    assert peak is not None and peak.math == "fp32" and peak.tflops == 8.1
    unknown = build_gpu_info(0, "NVIDIA Mystery 9000", (9, 0), vram_total=None, vram_free=None, sm_count=None,
                             pcie=Pcie(None, None), driver=None, cuda=None, torch_usable=True)
    assert math_peak(unknown, half=True, tf32=True) is None


def test_no_cuda_and_no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    scan = detect_gpus()
    assert scan.gpus == [] and not scan.cuda_available and not scan.nvml_available
    assert scan.note and "No CUDA GPU" in scan.note


def test_nvml_library_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([], fail_init=True))
    scan = detect_gpus()
    assert scan.gpus == [] and not scan.nvml_available


def test_driver_sees_gpu_but_torch_is_cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100]))
    scan = detect_gpus()
    assert len(scan.gpus) == 1
    g = scan.gpus[0]
    assert not g.torch_usable and g.architecture == "Hopper" and g.vram_total_bytes == H100["total"]
    assert g.driver == "550.54.15" and g.cuda == "12.4" and g.pcie == Pcie(5, 16)
    assert scan.note and "cannot use them" in scan.note


@dataclass
class _Props:
    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    uuid: str


def test_cuda_gpu_with_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: _Props(H100["name"], 9, 0, H100["total"], 132, "1234"))
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([H100]))
    scan = detect_gpus()
    g = scan.gpus[0]
    assert g.torch_usable and g.sm_count == 132 and g.vram_free_bytes == H100["free"]
    assert g.pcie == Pcie(5, 16) and g.cuda == "12.4" and scan.note is None


def test_cuda_gpu_without_nvml_uses_torch_for_free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: _Props("NVIDIA GeForce RTX 3080 Ti", 8, 6, 12 * 2**30, 80, "x"))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i: (11 * 2**30, 12 * 2**30))
    monkeypatch.setitem(sys.modules, "pynvml", None)
    scan = detect_gpus()
    g = scan.gpus[0]
    assert g.vram_free_bytes == 11 * 2**30 and g.pcie == Pcie(None, None)
    assert g.product.tier == 80 and g.product.suffix == "Ti" and g.architecture == "Ampere"
    assert scan.note and "NVML is unavailable" in scan.note
