"""What CPU this is: model, generation, cores, threads, ISA features, RAM."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Any

import psutil

from trainspeed.hardware.cpu_generations import microarchitecture, training_features


@dataclass(frozen=True)
class CpuInfo:
    """The host CPU and memory, as training sees them."""

    model: str
    vendor: str
    microarchitecture: str | None
    """Generation, e.g. "Alder Lake", "Zen 3", or a bound such as "Sapphire Rapids or later"."""
    microarchitecture_source: str | None
    """Where the generation came from: "model name", "cpuid", "isa flags", or "isa flags, not cpuid" (the CPUID
    model names a generation without an extension this CPU has: a VM's reported model, overruled)."""
    physical_cores: int | None
    logical_threads: int | None
    features: list[str]
    """Training-relevant ISA extensions present (AVX2, AVX-512, AVX512-BF16, AMX, ...)."""
    ram_total_bytes: int
    ram_available_bytes: int
    torch_threads: int
    """torch's intra-op thread count (torch.get_num_threads())."""
    family: int | None = None
    model_number: int | None = None
    stepping: int | None = None
    flags: list[str] = field(default_factory=list, repr=False)

    @property
    def native_bf16(self) -> bool:
        """Matrix units or instructions for bfloat16 (AVX512-BF16, AMX-BF16): CPU autocast to bf16 can pay."""
        return any(f in self.features for f in ("AVX512-BF16", "AMX-BF16"))


def _cpuinfo() -> dict[str, Any]:
    try:
        import cpuinfo  # py-cpuinfo

        return dict(cpuinfo.get_cpu_info())
    except Exception:  # py-cpuinfo shells out and parses; any failure leaves the fallbacks
        return {}


def from_facts(info: dict[str, Any], torch_threads: int, cores: int | None, threads: int | None,
               ram_total: int, ram_available: int) -> CpuInfo:
    """Build a CpuInfo from py-cpuinfo's dictionary and the counts (pure, for tests)."""
    model = str(info.get("brand_raw") or platform.processor() or "unknown CPU").strip()
    vendor = str(info.get("vendor_id_raw") or "unknown")
    flags = [str(f) for f in info.get("flags", [])]
    family, number, stepping = info.get("family"), info.get("model"), info.get("stepping")
    arch, source = microarchitecture(model, vendor, family, number, stepping, flags)
    return CpuInfo(
        model=model, vendor=vendor, microarchitecture=arch, microarchitecture_source=source,
        physical_cores=cores, logical_threads=threads, features=training_features(flags),
        ram_total_bytes=ram_total, ram_available_bytes=ram_available, torch_threads=torch_threads,
        family=family, model_number=number, stepping=stepping, flags=flags,
    )


def detect_cpu() -> CpuInfo:
    """Read this machine's CPU and memory facts."""
    import torch

    mem = psutil.virtual_memory()
    return from_facts(
        _cpuinfo(), torch_threads=torch.get_num_threads(),
        cores=psutil.cpu_count(logical=False), threads=psutil.cpu_count(logical=True),
        ram_total=int(mem.total), ram_available=int(mem.available),
    )


def usable_cores(root: str = "/sys/fs/cgroup") -> int | None:
    """How many CPUs this process may run on at once: its affinity (taskset, a container's cpuset) and its cgroup's
    CPU quota (a container's --cpus, cgroup v2 `cpu.max` or v1 `cpu.cfs_quota_us`), the least of those known;
    None when neither is. torch's default intra-op threads follow the affinity only."""
    import math
    import os

    found = []
    if hasattr(os, "sched_getaffinity"):
        found.append(len(os.sched_getaffinity(0)))
    for quota_file, period_file in (("cpu.max", None), ("cpu/cpu.cfs_quota_us", "cpu/cpu.cfs_period_us")):
        try:
            with open(os.path.join(root, quota_file)) as f:
                text = f.read().split()
            if period_file is not None:
                with open(os.path.join(root, period_file)) as f:
                    text.append(f.read().strip())
        except (OSError, ValueError):
            continue
        if len(text) >= 2 and text[0] not in ("max", "-1"):
            try:
                found.append(max(1, math.ceil(int(text[0]) / int(text[1]))))
            except ValueError:
                pass
        break
    return min(found) if found else None
