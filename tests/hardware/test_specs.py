"""Architecture by compute capability; the peak table and its keys."""

from __future__ import annotations

import pytest

from trainspeed.hardware import parse_gpu_name
from trainspeed.hardware.specs import GPU_SPECS, architecture_from_capability, lookup_spec


@pytest.mark.parametrize(("cc", "arch"), [
    ((6, 0), "Pascal"), ((6, 1), "Pascal"), ((7, 0), "Volta"), ((7, 5), "Turing"),
    ((8, 0), "Ampere"), ((8, 6), "Ampere"), ((8, 9), "Ada Lovelace"), ((9, 0), "Hopper"),
    ((10, 0), "Blackwell"), ((12, 0), "Blackwell"), ((1, 0), None),
])
def test_architecture_from_capability(cc: tuple[int, int], arch: str | None) -> None:
    assert architecture_from_capability(*cc) == arch


@pytest.mark.parametrize(("name", "key", "bf16"), [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.5),
    ("NVIDIA H100 PCIe", "H100 PCIe", 756),
    ("NVIDIA H200", "H200", 989.5),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB", 312),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB", 312),
    ("NVIDIA GeForce RTX 4090", "RTX 4090", 165.2),
    ("Tesla T4", "T4", None),
])
def test_lookup(name: str, key: str, bf16: float | None) -> None:
    k, spec = lookup_spec(parse_gpu_name(name))
    assert k == key and spec is not None and spec.bf16 == bf16


def test_unlisted_product_has_no_guessed_numbers() -> None:
    key, spec = lookup_spec(parse_gpu_name("NVIDIA GeForce RTX 3080 Ti Laptop GPU"))
    assert key == "RTX 3080 Ti Laptop" and spec is None


def test_every_row_cites_a_source_and_is_dense_sane() -> None:
    for key, spec in GPU_SPECS.items():
        assert spec.source.startswith("https://"), key
        if spec.tf32 is not None and spec.bf16 is not None:
            assert spec.bf16 >= spec.tf32, key  # bf16 tensor math is never slower than tf32


def test_usable_cores_are_the_least_of_the_affinity_and_the_cgroup_quota(tmp_path) -> None:
    import os

    from trainspeed.hardware.cpu import usable_cores

    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    (tmp_path / "cpu.max").write_text("max 100000\n")  # no quota
    assert usable_cores(str(tmp_path)) == affinity
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # --cpus=1.5: two threads may run
    assert usable_cores(str(tmp_path)) == min(2, affinity or 2)
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert usable_cores(str(v1)) == 1
