"""What CPU this is: model, generation, cores, threads, ISA features, RAM."""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from trainspeed._cache import default_cache_dir
from trainspeed._io import write_atomic
from trainspeed.errors import UsageError
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


CPUINFO_KEYS = ("brand_raw", "vendor_id_raw", "flags", "family", "model", "stepping")
"""What `from_facts` reads of py-cpuinfo's dictionary (all that the cache keeps)."""


def _machine_key() -> str | None:
    """What names this CPU cheaply: /proc/cpuinfo's first processor's identity lines (vendor, family, model, name,
    stepping, microcode, flags), the architecture and py-cpuinfo's version; None where there is no /proc/cpuinfo
    (nothing is cached there). A VM moved to another host reads other lines, and is asked afresh."""
    try:
        first = Path("/proc/cpuinfo").read_text().split("\n\n", 1)[0]
        from importlib.metadata import version

        tool = version("py-cpuinfo")
    except Exception:  # no /proc (macOS, Windows), or py-cpuinfo not installed
        return None
    names = ("vendor_id", "cpu family", "model", "model name", "stepping", "microcode", "flags")
    lines = [line for line in first.splitlines() if line.split(":", 1)[0].strip() in names]
    text = "\n".join([*lines, platform.machine(), tool])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _cpuinfo() -> dict[str, Any]:
    """py-cpuinfo's description of this CPU (the keys `from_facts` reads). py-cpuinfo runs a fresh interpreter to read
    CPUID (about a second, most of what the doctor spent after the script: BENCHMARKS.md, "Where the code's constants
    come from"): the answer is kept per machine (`_machine_key`) in the cache folder, and read back on the next run."""
    key = _machine_key()
    path = default_cache_dir() / "cpuinfo.json"
    if key is not None:
        try:
            kept = json.loads(path.read_text()).get(key)
            if isinstance(kept, dict):
                return kept
        except (OSError, ValueError, AttributeError):
            pass
    try:
        import cpuinfo  # py-cpuinfo

        info = {k: v for k, v in cpuinfo.get_cpu_info().items() if k in CPUINFO_KEYS}
    except Exception:  # py-cpuinfo shells out and parses; any failure leaves the fallbacks
        return {}
    if key is not None and info:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps({key: info}))
        except (OSError, UsageError):  # a read-only home: asked again next time
            pass
    return info


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
