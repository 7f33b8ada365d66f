"""CPU microarchitecture from the model string, else the CPUID family/model, else ISA flags."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Intel Core "Nth Gen" / model-number generation -> microarchitecture (desktop parts; mobile
# parts of gens 10 and 11 differ and are told apart by their "G"/"U" suffixes below).
# source: https://www.intel.com/content/www/us/en/processors/processor-numbers.html
_INTEL_CORE_GEN = {
    2: "Sandy Bridge", 3: "Ivy Bridge", 4: "Haswell", 5: "Broadwell", 6: "Skylake",
    7: "Kaby Lake", 8: "Coffee Lake", 9: "Coffee Lake Refresh", 10: "Comet Lake",
    11: "Rocket Lake", 12: "Alder Lake", 13: "Raptor Lake", 14: "Raptor Lake Refresh",
}
# Xeon Scalable: the digit after the class digit is the generation (Platinum 8380 -> 3).
# source: https://www.intel.com/content/www/us/en/products/details/processors/xeon/scalable.html
_XEON_SCALABLE_GEN = {1: "Skylake-SP", 2: "Cascade Lake", 3: "Ice Lake-SP", 4: "Sapphire Rapids", 5: "Emerald Rapids"}
# AMD Ryzen desktop thousands digit; EPYC last digit.
# source: https://www.amd.com/en/products/specifications/processors.html
_RYZEN_SERIES = {1: "Zen", 2: "Zen+", 3: "Zen 2", 5: "Zen 3", 7: "Zen 4", 9: "Zen 5"}
_EPYC_GEN = {1: "Zen", 2: "Zen 2", 3: "Zen 3", 4: "Zen 4", 5: "Zen 5"}


def from_model_name(model: str) -> str | None:
    """Microarchitecture named or implied by a CPU model string, or None."""
    s = model.replace("(R)", "").replace("(TM)", "")
    m = re.search(r"\bi[3579]-(\d{4,5})([A-Z]*)", s)
    if m:
        number, suffix = m.group(1), m.group(2)
        # 10th gen on: 5 digits (i9-12900K) or 4 digits starting "1" on mobile (i7-1165G7)
        gen = int(number[:2]) if len(number) == 5 or number[0] == "1" else int(number[0])
        if gen == 10 and len(number) == 4 and suffix.startswith("G"):
            return "Ice Lake"
        if gen == 11 and (len(number) == 4 or suffix.startswith("H")):
            return "Tiger Lake"
        if gen in _INTEL_CORE_GEN:
            return _INTEL_CORE_GEN[gen]
    m = re.search(r"\b(\d{1,2})th Gen Intel", s)
    if m and int(m.group(1)) in _INTEL_CORE_GEN:
        return _INTEL_CORE_GEN[int(m.group(1))]
    m = re.search(r"Core\s+Ultra\s+\d+\s+(\d)(\d{2})([A-Z]*)", s)
    if m:
        series, suffix = int(m.group(1)), m.group(3)
        if series == 1:
            return "Meteor Lake"
        if series == 2:
            return "Lunar Lake" if suffix.startswith("V") else "Arrow Lake"
    m = re.search(r"Xeon\s+(?:Platinum|Gold|Silver|Bronze)\s+\d(\d)\d{2}", s)
    if m and int(m.group(1)) in _XEON_SCALABLE_GEN:
        return _XEON_SCALABLE_GEN[int(m.group(1))]
    m = re.search(r"Xeon\s+6\d{3}[PE]", s)
    if m:
        return "Granite Rapids" if m.group(0).endswith("P") else "Sierra Forest"
    m = re.search(r"Ryzen\s+(?:Threadripper\s+)?(?:PRO\s+)?\d?\s*(\d)\d{3}", s)
    if m and int(m.group(1)) in _RYZEN_SERIES:
        return _RYZEN_SERIES[int(m.group(1))]
    m = re.search(r"EPYC\s+\d{3}(\d)", s)
    if m and int(m.group(1)) in _EPYC_GEN:
        return _EPYC_GEN[int(m.group(1))]
    m = re.search(r"\bApple\s+(M\d)", s)
    if m:
        return f"Apple {m.group(1)}"
    return None


# (vendor, family, model) -> microarchitecture.
# source: Linux arch/x86/include/asm/intel-family.h and
# https://en.wikichip.org/wiki/amd/cpuid (AMD families 17h, 19h, 1Ah).
_INTEL_FAMILY6 = {
    0x2A: "Sandy Bridge", 0x2D: "Sandy Bridge-EP", 0x3A: "Ivy Bridge", 0x3E: "Ivy Bridge-EP",
    0x3C: "Haswell", 0x3F: "Haswell-EP", 0x45: "Haswell", 0x46: "Haswell",
    0x3D: "Broadwell", 0x47: "Broadwell", 0x4F: "Broadwell-EP", 0x56: "Broadwell-DE",
    0x4E: "Skylake", 0x5E: "Skylake", 0x55: "Skylake-SP",
    0x8E: "Kaby Lake", 0x9E: "Coffee Lake", 0xA5: "Comet Lake", 0xA6: "Comet Lake",
    0x66: "Cannon Lake", 0x7D: "Ice Lake", 0x7E: "Ice Lake", 0x6A: "Ice Lake-SP", 0x6C: "Ice Lake-SP",
    0x8C: "Tiger Lake", 0x8D: "Tiger Lake", 0xA7: "Rocket Lake",
    0x97: "Alder Lake", 0x9A: "Alder Lake", 0xB7: "Raptor Lake", 0xBA: "Raptor Lake", 0xBF: "Raptor Lake",
    0x8F: "Sapphire Rapids", 0xCF: "Emerald Rapids", 0xAD: "Granite Rapids", 0xAF: "Sierra Forest",
    0xAA: "Meteor Lake", 0xAC: "Meteor Lake", 0xC5: "Arrow Lake", 0xC6: "Arrow Lake", 0xBD: "Lunar Lake",
}
# AMD: (family, first model, last model) -> microarchitecture
_AMD_RANGES = [
    (0x17, 0x00, 0x0F, "Zen"), (0x17, 0x10, 0x2F, "Zen+"), (0x17, 0x30, 0xAF, "Zen 2"),
    (0x19, 0x00, 0x0F, "Zen 3"), (0x19, 0x10, 0x1F, "Zen 4"), (0x19, 0x20, 0x5F, "Zen 3"),
    (0x19, 0x60, 0xAF, "Zen 4"), (0x1A, 0x00, 0xFF, "Zen 5"),
]


def from_cpuid(vendor: str, family: int | None, model: int | None, stepping: int | None = None) -> str | None:
    """Microarchitecture from the CPUID family/model numbers, or None if not in the table."""
    if family is None or model is None:
        return None
    v = vendor.lower()
    if "intel" in v and family == 6:
        name = _INTEL_FAMILY6.get(model)
        if model == 0x55 and stepping is not None:
            # one model number, three generations told apart by stepping (intel-family.h)
            name = "Cooper Lake" if stepping >= 10 else "Cascade Lake" if stepping >= 5 else "Skylake-SP"
        return name
    if "amd" in v:
        for fam, lo, hi, name in _AMD_RANGES:
            if family == fam and lo <= model <= hi:
                return name
    return None


# Ordered newest first: the first flag present gives the lower bound.
_INTEL_FLAG_BOUNDS = [
    ("amx_tile", "Sapphire Rapids or later"),
    ("avx512_fp16", "Sapphire Rapids or later"),
    ("avx512_bf16", "Cooper Lake or later"),
    ("avx512_vnni", "Cascade Lake or later"),
    ("avx512f", "Skylake-SP or later"),
    ("avx2", "Haswell or later"),
    ("avx", "Sandy Bridge or later"),
]
_AMD_FLAG_BOUNDS = [
    ("avx512_bf16", "Zen 4 or later"),
    ("avx512f", "Zen 4 or later"),
    ("vaes", "Zen 3 or later"),
    ("clwb", "Zen 2 or later"),
    ("sha_ni", "Zen or later"),
    ("avx2", "Excavator or later"),
]


def from_isa_flags(vendor: str, flags: Iterable[str]) -> str | None:
    """A lower bound on the generation from which ISA extensions exist (AMX tiles => Sapphire Rapids+)."""
    have = {f.lower() for f in flags}
    table = _AMD_FLAG_BOUNDS if "amd" in vendor.lower() else _INTEL_FLAG_BOUNDS
    for flag, bound in table:
        if flag in have:
            return bound
    return None


# ISA extensions only some generations have: a CPUID model outside a flag's holders contradicts the flag. A VM's
# hypervisor may report a family/model of its own choosing (family 6 model 167, "Rocket Lake", has been seen on a VM
# whose ISA has AMX and AVX512-FP16), while the ISA it passes through is the host's. It may hide extensions too, so
# only a flag that is present is evidence; a missing one is not.
# sources: Intel Architecture Instruction Set Extensions Programming Reference (AMX, AVX512-FP16, AVX512-BF16),
# Linux arch/x86/include/asm/intel-family.h; AMD's Zen 4 and Zen 5 software optimization guides (AVX-512, BF16).
_INTEL_ISA_HOLDERS = {
    "amx_tile": {"Sapphire Rapids", "Emerald Rapids", "Granite Rapids"},
    "avx512_fp16": {"Sapphire Rapids", "Emerald Rapids", "Granite Rapids", "Alder Lake"},
    "avx512_bf16": {"Cooper Lake", "Sapphire Rapids", "Emerald Rapids", "Granite Rapids"},
}
_AMD_ISA_HOLDERS = {
    "avx512_bf16": {"Zen 4", "Zen 5"},
    "avx512f": {"Zen 4", "Zen 5"},
}


def contradicted_by_isa(vendor: str, name: str, flags: Iterable[str]) -> str | None:
    """The first ISA flag present that generation `name` does not have (None: no contradiction)."""
    have = {f.lower() for f in flags}
    table = _AMD_ISA_HOLDERS if "amd" in vendor.lower() else _INTEL_ISA_HOLDERS
    return next((flag for flag, holders in table.items() if flag in have and name not in holders), None)


# Extensions that matter for training on a CPU, with the name people know them by.
TRAINING_FEATURES = [
    ("avx2", "AVX2"), ("fma", "FMA"), ("f16c", "F16C"), ("avx512f", "AVX-512"),
    ("avx512_vnni", "AVX512-VNNI"), ("avx512_bf16", "AVX512-BF16"), ("avx512_fp16", "AVX512-FP16"),
    ("avx_vnni", "AVX-VNNI"), ("amx_tile", "AMX"), ("amx_bf16", "AMX-BF16"), ("amx_int8", "AMX-INT8"),
    ("asimd", "NEON"), ("sve", "SVE"),
]


def training_features(flags: Iterable[str]) -> list[str]:
    """The training-relevant extensions among a CPU's flags, by their common names."""
    have = {f.lower() for f in flags}
    return [name for flag, name in TRAINING_FEATURES if flag in have]


def microarchitecture(model: str, vendor: str, family: int | None, model_number: int | None,
                      stepping: int | None, flags: Iterable[str]) -> tuple[str | None, str | None]:
    """(microarchitecture, source) where source is "model name", "cpuid", "isa flags", or "isa flags, not cpuid"
    (the CPUID family/model names a generation that lacks an extension the CPU has: a VM's reported model, which
    the ISA overrules)."""
    name = from_model_name(model)
    if name:
        return name, "model name"
    name = from_cpuid(vendor, family, model_number, stepping)
    flags = list(flags)
    if name and contradicted_by_isa(vendor, name, flags) is None:
        return name, "cpuid"
    if name:
        bound = from_isa_flags(vendor, flags)
        return bound, "isa flags, not cpuid"
    name = from_isa_flags(vendor, flags)
    if name:
        return name, "isa flags"
    return None, None
