"""parse_gpu_name on real product names, as drivers report them."""

from __future__ import annotations

import pytest

from trainspeed.hardware import parse_gpu_name

# name, line, generation, tier, suffix, mobile, architecture
CASES = [
    ("NVIDIA GeForce GTX 1080 Ti", "GeForce GTX", 10, 80, "Ti", False, "Pascal"),
    ("GeForce GTX 1060 6GB", "GeForce GTX", 10, 60, "", False, "Pascal"),
    ("NVIDIA GeForce GTX 1050 Ti with Max-Q Design", "GeForce GTX", 10, 50, "Ti", True, "Pascal"),
    ("NVIDIA GeForce GTX 1650", "GeForce GTX", 16, 50, "", False, "Turing"),
    ("NVIDIA GeForce GTX 1660 SUPER", "GeForce GTX", 16, 60, "SUPER", False, "Turing"),
    ("NVIDIA GeForce GTX 1660 Ti", "GeForce GTX", 16, 60, "Ti", False, "Turing"),
    ("NVIDIA GeForce RTX 2060", "GeForce RTX", 20, 60, "", False, "Turing"),
    ("NVIDIA GeForce RTX 2080 Super", "GeForce RTX", 20, 80, "SUPER", False, "Turing"),
    ("NVIDIA GeForce RTX 2080 Ti", "GeForce RTX", 20, 80, "Ti", False, "Turing"),
    ("NVIDIA GeForce RTX 3050 Laptop GPU", "GeForce RTX", 30, 50, "", True, "Ampere"),
    ("NVIDIA GeForce RTX 3060", "GeForce RTX", 30, 60, "", False, "Ampere"),
    ("NVIDIA GeForce RTX 3070 Ti Laptop GPU", "GeForce RTX", 30, 70, "Ti", True, "Ampere"),
    ("NVIDIA GeForce RTX 3080 Ti", "GeForce RTX", 30, 80, "Ti", False, "Ampere"),
    ("NVIDIA GeForce RTX 3090", "GeForce RTX", 30, 90, "", False, "Ampere"),
    ("NVIDIA GeForce RTX 4060 Laptop GPU", "GeForce RTX", 40, 60, "", True, "Ada Lovelace"),
    ("NVIDIA GeForce RTX 4070", "GeForce RTX", 40, 70, "", False, "Ada Lovelace"),
    ("NVIDIA GeForce RTX 4070 Ti SUPER", "GeForce RTX", 40, 70, "Ti SUPER", False, "Ada Lovelace"),
    ("NVIDIA GeForce RTX 4080 SUPER", "GeForce RTX", 40, 80, "SUPER", False, "Ada Lovelace"),
    ("NVIDIA GeForce RTX 4090 D", "GeForce RTX", 40, 90, "D", False, "Ada Lovelace"),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX", 40, 90, "", False, "Ada Lovelace"),
    ("NVIDIA GeForce RTX 5070 Ti", "GeForce RTX", 50, 70, "Ti", False, "Blackwell"),
    ("NVIDIA GeForce RTX 5090", "GeForce RTX", 50, 90, "", False, "Blackwell"),
    ("NVIDIA GeForce RTX 5080 Laptop GPU", "GeForce RTX", 50, 80, "", True, "Blackwell"),
    ("NVIDIA GeForce GTX 980 Ti", "GeForce GTX", 9, 80, "Ti", False, "Maxwell"),
    ("NVIDIA TITAN RTX", "TITAN", None, None, "", False, "Turing"),
    ("NVIDIA TITAN V", "TITAN", None, None, "", False, "Volta"),
    ("NVIDIA TITAN Xp", "TITAN", None, None, "", False, "Pascal"),
    ("GeForce GTX TITAN X", "TITAN", None, None, "", False, "Maxwell"),
    ("Quadro RTX 6000", "Quadro RTX", None, None, "", False, "Turing"),
    ("Quadro P4000", "Quadro", None, None, "", False, "Pascal"),
    ("NVIDIA RTX A6000", "RTX professional", None, None, "", False, "Ampere"),
    ("NVIDIA RTX A4000 Laptop GPU", "RTX professional", None, None, "", True, "Ampere"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX professional", None, None, "", False, "Ada Lovelace"),
    ("NVIDIA RTX 4000 SFF Ada Generation", "RTX professional", None, None, "", False, "Ada Lovelace"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX professional", None, None, "", False, "Blackwell"),
    ("Tesla P100-PCIE-16GB", "data center", None, None, "", False, "Pascal"),
    ("Tesla V100-SXM2-16GB", "data center", None, None, "", False, "Volta"),
    ("Tesla T4", "data center", None, None, "", False, "Turing"),
    ("NVIDIA A10G", "data center", None, None, "", False, "Ampere"),
    ("NVIDIA A100-SXM4-80GB", "data center", None, None, "", False, "Ampere"),
    ("NVIDIA A100-PCIE-40GB", "data center", None, None, "", False, "Ampere"),
    ("NVIDIA A100 80GB PCIe", "data center", None, None, "", False, "Ampere"),
    ("NVIDIA L4", "data center", None, None, "", False, "Ada Lovelace"),
    ("NVIDIA L40S", "data center", None, None, "", False, "Ada Lovelace"),
    ("NVIDIA H100 80GB HBM3", "data center", None, None, "", False, "Hopper"),
    ("NVIDIA H100 PCIe", "data center", None, None, "", False, "Hopper"),
    ("NVIDIA H100 NVL", "data center", None, None, "", False, "Hopper"),
    ("NVIDIA H200", "data center", None, None, "", False, "Hopper"),
    ("NVIDIA GH200 480GB", "data center", None, None, "", False, "Hopper"),
    ("NVIDIA B200", "data center", None, None, "", False, "Blackwell"),
]


@pytest.mark.parametrize(("name", "line", "generation", "tier", "suffix", "mobile", "arch"), CASES)
def test_parse_gpu_name(name: str, line: str, generation: int | None, tier: int | None,
                        suffix: str, mobile: bool, arch: str) -> None:
    p = parse_gpu_name(name)
    assert (p.line, p.generation, p.tier, p.suffix, p.mobile, p.architecture) == (
        line, generation, tier, suffix, mobile, arch)


@pytest.mark.parametrize(("name", "model", "form", "memory"), [
    ("NVIDIA A100-SXM4-80GB", "A100", "SXM", 80),
    ("NVIDIA A100-PCIE-40GB", "A100", "PCIe", 40),
    ("NVIDIA A100 80GB PCIe", "A100", "PCIe", 80),
    ("NVIDIA H100 80GB HBM3", "H100", "SXM", 80),
    ("NVIDIA H100 NVL", "H100", "NVL", None),
    ("Tesla V100-SXM2-16GB", "V100", "SXM", 16),
    ("NVIDIA A10G", "A10G", None, None),
    ("NVIDIA GH200 480GB", "GH200", None, 480),
])
def test_data_center_model_form_memory(name: str, model: str, form: str | None, memory: int | None) -> None:
    p = parse_gpu_name(name)
    assert (p.model, p.form_factor, p.memory_gb) == (model, form, memory)


def test_tier_orders_geforce_parts() -> None:
    tiers = [parse_gpu_name(f"NVIDIA GeForce RTX 40{t}").tier for t in ("50", "60", "70", "80", "90")]
    assert tiers == sorted(tiers) == [50, 60, 70, 80, 90]


def test_unknown_name_is_not_an_error() -> None:
    p = parse_gpu_name("Some Accelerator 9000")
    assert p.line == "unknown" and p.architecture is None and p.generation is None


def test_trademark_marks_are_ignored() -> None:
    assert parse_gpu_name("NVIDIA(R) GeForce(R) RTX 3080").tier == 80
