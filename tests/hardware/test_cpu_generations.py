"""CPU generation: model string first, then the CPUID table, then ISA flags."""

from __future__ import annotations

import pytest

from trainspeed.hardware.cpu import from_facts
from trainspeed.hardware.cpu_generations import (
    contradicted_by_isa,
    from_cpuid,
    from_isa_flags,
    from_model_name,
    microarchitecture,
    training_features,
)


@pytest.mark.parametrize(("model", "arch"), [
    ("12th Gen Intel(R) Core(TM) i9-12900KF", "Alder Lake"),
    ("13th Gen Intel(R) Core(TM) i7-13700K", "Raptor Lake"),
    ("14th Gen Intel(R) Core(TM) i9-14900K", "Raptor Lake Refresh"),
    ("Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz", "Coffee Lake"),
    ("Intel(R) Core(TM) i7-4770 CPU @ 3.40GHz", "Haswell"),
    ("Intel(R) Core(TM) i5-10400 CPU @ 2.90GHz", "Comet Lake"),
    ("Intel(R) Core(TM) i7-1065G7 CPU @ 1.30GHz", "Ice Lake"),
    ("11th Gen Intel(R) Core(TM) i7-1165G7 @ 2.80GHz", "Tiger Lake"),
    ("11th Gen Intel(R) Core(TM) i9-11900K @ 3.50GHz", "Rocket Lake"),
    ("12th Gen Intel(R) Core(TM) i7-1260P", "Alder Lake"),
    ("Intel(R) Core(TM) Ultra 7 155H", "Meteor Lake"),
    ("Intel(R) Core(TM) Ultra 9 285K", "Arrow Lake"),
    ("Intel(R) Core(TM) Ultra 7 258V", "Lunar Lake"),
    ("Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", "Ice Lake-SP"),
    ("Intel(R) Xeon(R) Platinum 8480+", "Sapphire Rapids"),
    ("Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz", "Cascade Lake"),
    ("Intel(R) Xeon(R) Platinum 8592+", "Emerald Rapids"),
    ("AMD Ryzen 9 5950X 16-Core Processor", "Zen 3"),
    ("AMD Ryzen 9 7950X 16-Core Processor", "Zen 4"),
    ("AMD Ryzen 7 3700X 8-Core Processor", "Zen 2"),
    ("AMD Ryzen 9 9950X 16-Core Processor", "Zen 5"),
    ("AMD Ryzen Threadripper 3990X 64-Core Processor", "Zen 2"),
    ("AMD EPYC 7763 64-Core Processor", "Zen 3"),
    ("AMD EPYC 9654 96-Core Processor", "Zen 4"),
    ("AMD EPYC 7542 32-Core Processor", "Zen 2"),
    ("Apple M2 Pro", "Apple M2"),
])
def test_model_name(model: str, arch: str) -> None:
    assert from_model_name(model) == arch


@pytest.mark.parametrize("model", ["Intel(R) Xeon(R) Processor", "AMD EPYC", "Common KVM processor", ""])
def test_model_name_without_a_generation(model: str) -> None:
    assert from_model_name(model) is None


@pytest.mark.parametrize(("vendor", "family", "model", "stepping", "arch"), [
    ("GenuineIntel", 6, 0x97, None, "Alder Lake"),
    ("GenuineIntel", 6, 0x8F, None, "Sapphire Rapids"),
    ("GenuineIntel", 6, 0x55, 4, "Skylake-SP"),
    ("GenuineIntel", 6, 0x55, 7, "Cascade Lake"),
    ("GenuineIntel", 6, 0x55, 11, "Cooper Lake"),
    ("GenuineIntel", 6, 0x6A, None, "Ice Lake-SP"),
    ("AuthenticAMD", 25, 1, 1, "Zen 3"),
    ("AuthenticAMD", 25, 0x11, 1, "Zen 4"),
    ("AuthenticAMD", 23, 0x31, 0, "Zen 2"),
    ("AuthenticAMD", 26, 0x02, 0, "Zen 5"),
])
def test_cpuid_table(vendor: str, family: int, model: int, stepping: int | None, arch: str) -> None:
    assert from_cpuid(vendor, family, model, stepping) == arch


def test_cpuid_unknown() -> None:
    assert from_cpuid("GenuineIntel", 6, 0x01) is None
    assert from_cpuid("GenuineIntel", None, None) is None


def test_isa_flags_give_a_lower_bound() -> None:
    assert from_isa_flags("GenuineIntel", ["avx2", "avx512f", "amx_tile"]) == "Sapphire Rapids or later"
    assert from_isa_flags("GenuineIntel", ["avx2", "avx512f", "avx512_bf16"]) == "Cooper Lake or later"
    assert from_isa_flags("AuthenticAMD", ["avx2", "avx512f", "avx512_bf16"]) == "Zen 4 or later"
    assert from_isa_flags("GenuineIntel", ["sse2"]) is None


def test_order_model_name_then_cpuid_then_flags() -> None:
    flags = ["avx2", "amx_tile"]
    assert microarchitecture("12th Gen Intel(R) Core(TM) i9-12900KF", "GenuineIntel", 6, 0x8F, 0, flags) == (
        "Alder Lake", "model name")
    assert microarchitecture("Intel(R) Xeon(R) Processor", "GenuineIntel", 6, 0x8F, 0, flags) == (
        "Sapphire Rapids", "cpuid")
    assert microarchitecture("Intel(R) Xeon(R) Processor", "GenuineIntel", 6, 0x01, 0, flags) == (
        "Sapphire Rapids or later", "isa flags")
    assert microarchitecture("Mystery", "Nobody", None, None, None, []) == (None, None)


def test_training_features_use_common_names() -> None:
    flags = ["fpu", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"]
    assert training_features(flags) == ["AVX2", "FMA", "AVX-512", "AVX512-BF16", "AMX", "AMX-BF16"]


def test_from_facts_builds_the_report_from_recorded_cpuinfo() -> None:
    info = {"brand_raw": "Intel(R) Xeon(R) Processor", "vendor_id_raw": "GenuineIntel",
            "family": 6, "model": 0x01, "stepping": 0,
            "flags": ["avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"]}
    cpu = from_facts(info, torch_threads=4, cores=4, threads=8, ram_total=32 * 2**30, ram_available=30 * 2**30)
    assert cpu.microarchitecture == "Sapphire Rapids or later"
    assert cpu.microarchitecture_source == "isa flags"
    assert cpu.features == ["AVX2", "AVX-512", "AVX512-BF16", "AMX", "AMX-BF16"]
    assert (cpu.physical_cores, cpu.logical_threads, cpu.torch_threads) == (4, 8, 4)


def test_from_facts_survives_an_empty_cpuinfo() -> None:
    cpu = from_facts({}, torch_threads=1, cores=None, threads=None, ram_total=1, ram_available=1)
    assert cpu.vendor == "unknown" and cpu.features == [] and cpu.microarchitecture is None


# /proc/cpuinfo of a 2-vCPU cloud VM (2026-11-27): "Intel(R) Xeon(R) Processor", family 6 model 167 (Rocket Lake's
# number), with the host's AMX and AVX512-FP16 passed through; the training-relevant flags, as recorded
VM_FLAGS = ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
            "amx_tile", "amx_bf16", "amx_int8", "hypervisor"]


def test_a_vms_cpuid_model_is_overruled_by_the_isa_it_contradicts() -> None:
    assert from_cpuid("GenuineIntel", 6, 167) == "Rocket Lake"
    assert microarchitecture("Intel(R) Xeon(R) Processor", "GenuineIntel", 6, 167, 1, VM_FLAGS) == (
        "Sapphire Rapids or later", "isa flags, not cpuid")
    # a real Rocket Lake shows AVX-512 with VNNI and no BF16 or AMX: its CPUID model stands
    rocket = ["avx2", "avx512f", "avx512_vnni"]
    assert microarchitecture("Intel(R) Xeon(R) Processor", "GenuineIntel", 6, 167, 1, rocket) == (
        "Rocket Lake", "cpuid")
    # a hypervisor that hides extensions contradicts nothing: a flag missing is no evidence
    assert microarchitecture("Intel(R) Xeon(R) Processor", "GenuineIntel", 6, 0x8F, 8, ["avx2"]) == (
        "Sapphire Rapids", "cpuid")
    # AMD: AVX-512 on a model CPUID numbers Zen 3 means Zen 4 or later
    assert microarchitecture("AMD EPYC Processor", "AuthenticAMD", 0x19, 0x01, 1, ["avx2", "avx512f"]) == (
        "Zen 4 or later", "isa flags, not cpuid")
    assert contradicted_by_isa("AuthenticAMD", "Zen 4", ["avx512f", "avx512_bf16"]) is None


def test_hw_says_why_the_vms_model_was_overruled() -> None:
    from rich.console import Console

    from trainspeed.report.text import cpu_lines

    info = {"brand_raw": "Intel(R) Xeon(R) Processor", "vendor_id_raw": "GenuineIntel", "family": 6, "model": 167,
            "stepping": 1, "flags": VM_FLAGS}
    cpu = from_facts(info, torch_threads=2, cores=2, threads=2, ram_total=24 * 2**30, ram_available=20 * 2**30)
    console = Console(width=300, record=True)
    console.print(cpu_lines(cpu)[0])
    assert console.export_text().strip() == (
        "Intel(R) Xeon(R) Processor (GenuineIntel): Sapphire Rapids or later, a lower bound from the ISA flags "
        "(CPUID family 6 model 167 names Rocket Lake, which has no AMX: a model a virtual machine reports, the ISA "
        "is the host's)")


def test_the_cpu_s_description_is_asked_once_per_machine(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """py-cpuinfo runs a fresh interpreter to read CPUID (1.1 s, most of what the doctor spent after the script on the
    VM of 2026-11-27): kept per machine in the cache folder, asked again where the machine's lines differ or the
    cache is unreadable."""
    import cpuinfo

    from trainspeed.hardware import cpu

    asked: list[int] = []

    def get_cpu_info() -> dict:  # type: ignore[type-arg]
        asked.append(1)
        return {"brand_raw": "Test CPU", "vendor_id_raw": "GenuineIntel", "flags": ["avx2"], "family": 6,
                "model": 167, "stepping": 1, "hz_actual": (3.1e9, 0)}

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cpuinfo, "get_cpu_info", get_cpu_info)
    monkeypatch.setattr(cpu, "_machine_key", lambda: "machine-a")
    first = cpu._cpuinfo()
    assert first["brand_raw"] == "Test CPU" and "hz_actual" not in first and len(asked) == 1
    assert cpu._cpuinfo() == first and len(asked) == 1  # read back
    monkeypatch.setattr(cpu, "_machine_key", lambda: "machine-b")  # a VM moved to another host
    assert cpu._cpuinfo() == first and len(asked) == 2
    (tmp_path / "trainspeed" / "cpuinfo.json").write_text("{not json")
    assert cpu._cpuinfo() == first and len(asked) == 3
    monkeypatch.setattr(cpu, "_machine_key", lambda: None)  # no /proc/cpuinfo: asked every time, nothing kept
    cpu._cpuinfo()
    cpu._cpuinfo()
    assert len(asked) == 5
