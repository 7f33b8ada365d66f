"""GPU facts as data: architecture by compute capability, peak rates and bandwidth by product.

Every peak is *dense* (no 2:4 sparsity), in TFLOP/s; bandwidth in GB/s (10**9 bytes/s).
GeForce tensor rates are the FP16/BF16-input, FP32-accumulate rates (what autocast uses).
A value we could not source is None, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainspeed.hardware.names import GpuProduct

# source: CUDA C++ Programming Guide, "Compute Capabilities" table,
# https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#compute-capabilities
_ARCH_BY_MAJOR = {3: "Kepler", 5: "Maxwell", 6: "Pascal", 8: "Ampere", 9: "Hopper", 10: "Blackwell", 12: "Blackwell"}


def architecture_from_capability(major: int, minor: int) -> str | None:
    """Architecture name of a compute capability (7.5 -> Turing, 8.9 -> Ada Lovelace)."""
    if major == 7:
        return "Turing" if minor >= 5 else "Volta"
    if major == 8 and minor == 9:
        return "Ada Lovelace"
    return _ARCH_BY_MAJOR.get(major)


def supports_bf16(major: int) -> bool:
    """BF16 tensor-core math exists from Ampere (8.0) on (same source as above)."""
    return major >= 8


def supports_tf32(major: int) -> bool:
    """TF32 tensor-core math exists from Ampere (8.0) on."""
    return major >= 8


@dataclass(frozen=True)
class GpuSpec:
    """Peak numbers of one product, with where they come from."""

    fp32: float | None
    tf32: float | None
    bf16: float | None
    bandwidth_gbs: float | None
    source: str


_V100 = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
_A100 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_H100 = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H200 = "https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446"
_AMPERE_WP = "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"
_ADA_WP = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
_TURING_WP = "https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/turing-architecture/NVIDIA-Turing-Architecture-Whitepaper.pdf"

# Keys are produced by spec_key() below.
GPU_SPECS: dict[str, GpuSpec] = {
    # data centre
    "P100 SXM": GpuSpec(10.6, None, None, 732, "https://images.nvidia.com/content/tesla/pdf/nvidia-tesla-p100-datasheet.pdf"),
    "P100 PCIe": GpuSpec(9.3, None, None, 732, "https://images.nvidia.com/content/tesla/pdf/nvidia-tesla-p100-PCIe-datasheet.pdf"),
    "V100 SXM": GpuSpec(15.7, None, None, 900, _V100),
    "V100 PCIe": GpuSpec(14.0, None, None, 900, _V100),
    "T4": GpuSpec(8.1, None, None, 320, "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf"),
    "A100 SXM 40GB": GpuSpec(19.5, 156, 312, 1555, _A100),
    "A100 SXM 80GB": GpuSpec(19.5, 156, 312, 2039, _A100),
    "A100 PCIe 40GB": GpuSpec(19.5, 156, 312, 1555, _A100),
    "A100 PCIe 80GB": GpuSpec(19.5, 156, 312, 1935, _A100),
    "A10": GpuSpec(31.2, 62.5, 125, 600, "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf"),
    "A30": GpuSpec(10.3, 82, 165, 933, "https://www.nvidia.com/content/dam/en-zz/Solutions/data-center/products/a30-gpu/pdf/a30-datasheet.pdf"),
    "L4": GpuSpec(30.3, 60, 121, 300, "https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet"),
    "L40": GpuSpec(90.5, 90.5, 181, 864, "https://images.nvidia.com/content/Solutions/data-center/vgpu-L40-datasheet.pdf"),
    "L40S": GpuSpec(91.6, 183, 362, 864, "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"),
    "H100 SXM": GpuSpec(67, 494.5, 989.5, 3350, _H100),
    "H100 PCIe": GpuSpec(51, 378, 756, 2000, _H100),
    "H100 NVL": GpuSpec(60, 417.5, 835.5, 3900, _H100),
    "H200": GpuSpec(67, 494.5, 989.5, 4800, _H200),
    "GH200": GpuSpec(67, 494.5, 989.5, None, "https://resources.nvidia.com/en-us-grace-cpu/grace-hopper-superchip"),
    "B200": GpuSpec(75, 1125, 2250, 8000, "https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet"),
    # GeForce (tensor rates: FP32 accumulate)
    "RTX 2080 Ti": GpuSpec(13.4, None, None, 616, _TURING_WP),
    "RTX 3070": GpuSpec(20.3, 20.3, 40.6, 448, _AMPERE_WP),
    "RTX 3080": GpuSpec(29.8, 29.8, 59.5, 760, _AMPERE_WP),
    "RTX 3090": GpuSpec(35.6, 35.6, 71, 936, _AMPERE_WP),
    "RTX 4080": GpuSpec(48.7, 48.7, 97.5, 716.8, _ADA_WP),
    "RTX 4090": GpuSpec(82.6, 82.6, 165.2, 1008, _ADA_WP),
}


def spec_key(product: GpuProduct) -> str:
    """The GPU_SPECS key of a parsed product name."""
    if product.line == "data center":
        model = product.model
        if model in ("A100",):
            return f"{model} {product.form_factor or 'SXM'} {product.memory_gb or 40}GB"
        if model in ("P100", "V100", "H100") and product.form_factor:
            return f"{model} {product.form_factor}"
        if model == "H100":
            return "H100 SXM"
        return model
    if product.line.startswith("GeForce"):
        suffix = f" {product.suffix}" if product.suffix else ""
        mobile = " Laptop" if product.mobile else ""
        return f"{product.model}{suffix}{mobile}"
    return product.model


def lookup_spec(product: GpuProduct) -> tuple[str, GpuSpec | None]:
    """(key, spec or None) for a parsed product name."""
    key = spec_key(product)
    return key, GPU_SPECS.get(key)
