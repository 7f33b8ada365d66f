"""Parse an NVIDIA product name ("NVIDIA GeForce RTX 4070 Ti SUPER") into line, generation, tier."""

from __future__ import annotations

import re
from dataclasses import dataclass

# GeForce generation -> architecture. Source: NVIDIA product pages, e.g.
# https://www.nvidia.com/en-us/geforce/graphics-cards/compare/
_GEFORCE_ARCH = {
    9: "Fermi", 10: "Pascal", 16: "Turing", 20: "Turing",
    30: "Ampere", 40: "Ada Lovelace", 50: "Blackwell",
}
# Older GeForce numbering (GTX 680, 780, 980): series digit -> architecture.
_GEFORCE_3DIGIT_ARCH = {4: "Fermi", 5: "Fermi", 6: "Kepler", 7: "Kepler", 9: "Maxwell"}

# Data-centre chip letter -> architecture (P100, V100, T4, A100, L4, H100, B200).
# Source: https://docs.nvidia.com/datacenter/tesla/ (product data sheets).
_DC_LETTER_ARCH = {
    "K": "Kepler", "M": "Maxwell", "P": "Pascal", "V": "Volta", "T": "Turing",
    "A": "Ampere", "L": "Ada Lovelace", "H": "Hopper", "GH": "Hopper",
    "B": "Blackwell", "GB": "Blackwell",
}

_NAMED_ARCH = ("Blackwell", "Hopper", "Ada", "Ampere", "Turing", "Volta", "Pascal", "Maxwell")


@dataclass(frozen=True)
class GpuProduct:
    """An NVIDIA product name taken apart."""

    name: str
    """The name as given, stripped."""
    line: str
    """Product line: "GeForce RTX", "GeForce GTX", "TITAN", "Quadro RTX", "RTX professional", "data center", ..."""
    generation: int | None
    """GeForce series (10, 16, 20, 30, 40, 50); None where the line has no such numbering."""
    tier: int | None
    """Position within a generation: 90 > 80 > 70 > 60 > 50 (GeForce); None where not numbered so."""
    suffix: str
    """"", "Ti", "SUPER", "Ti SUPER", "D", ... (sits between tiers)."""
    mobile: bool
    """A laptop part ("Laptop GPU", "Max-Q", "Mobile")."""
    architecture: str | None
    """Pascal, Volta, Turing, Ampere, Ada Lovelace, Hopper, Blackwell, ... or None if the name does not say."""
    model: str
    """The core model: "RTX 4070", "H100", "A6000", "TITAN RTX"."""
    form_factor: str | None = None
    """Data-centre board: "SXM", "PCIe", "NVL" (None when the name does not say)."""
    memory_gb: int | None = None
    """Memory size when the name carries it ("A100-SXM4-80GB")."""


def _suffix(rest: str) -> str:
    words = rest.replace("-", " ").split()
    ti = any(w.lower() == "ti" for w in words)
    sup = any(w.lower() == "super" for w in words)
    d = any(w == "D" for w in words)
    if ti and sup:
        return "Ti SUPER"
    if ti:
        return "Ti"
    if sup:
        return "SUPER"
    if d:
        return "D"
    return ""


def _mobile(name: str) -> bool:
    return bool(re.search(r"\b(laptop|max-q|mobile)\b", name, re.IGNORECASE))


def _memory_gb(name: str) -> int | None:
    m = re.search(r"(\d+)\s*GB", name, re.IGNORECASE)
    return int(m.group(1)) if m else None


def _form_factor(name: str) -> str | None:
    low = name.lower()
    if "nvl" in low:
        return "NVL"
    if "sxm" in low or "hbm3" in low:  # "NVIDIA H100 80GB HBM3" is the SXM5 board's name
        return "SXM"
    if "pcie" in low:
        return "PCIe"
    return None


def _geforce(name: str, m: re.Match[str]) -> GpuProduct:
    kind, number, rest = m.group(1).upper(), m.group(2), m.group(3)
    line = f"GeForce {kind}"
    if len(number) == 4:
        generation, tier = int(number[:2]), int(number[2:])
        arch = _GEFORCE_ARCH.get(generation)
    else:  # GTX 980, GTX 780: series digit then tier
        generation, tier = int(number[0]), int(number[1:])
        arch = _GEFORCE_3DIGIT_ARCH.get(generation)
    return GpuProduct(
        name=name, line=line, generation=generation, tier=tier, suffix=_suffix(rest),
        mobile=_mobile(name), architecture=arch, model=f"{kind} {number}",
    )


def _titan(name: str) -> GpuProduct:
    rest = re.sub(r"^.*?TITAN\s*", "", name, flags=re.IGNORECASE).strip()
    arch = None
    up = rest.upper()
    if up.startswith("RTX"):
        arch = "Turing"
    elif up.startswith("V"):
        arch = "Volta"
    elif up.startswith("XP") or "PASCAL" in up:
        arch = "Pascal"
    elif up.startswith("X") and "GTX" in name.upper():
        arch = "Maxwell"  # "GeForce GTX TITAN X" (2015)
    elif up.startswith("X"):
        arch = "Pascal"  # "NVIDIA TITAN X" (2016)
    elif up in ("", "BLACK", "Z"):
        arch = "Kepler"
    return GpuProduct(
        name=name, line="TITAN", generation=None, tier=None, suffix="",
        mobile=False, architecture=arch, model=f"TITAN {rest}".strip(),
    )


def _named_arch(name: str) -> str | None:
    for arch in _NAMED_ARCH:
        if re.search(rf"\b{arch}\b", name, re.IGNORECASE):
            return "Ada Lovelace" if arch == "Ada" else arch
    return None


def _professional(name: str) -> GpuProduct | None:
    arch: str | None
    # Quadro RTX 6000 (Turing); Quadro P4000 (Pascal); Quadro GV100 (Volta)
    m = re.search(r"\bQuadro\s+(RTX\s+)?([A-Z]*)(\d+)", name, re.IGNORECASE)
    if m:
        if m.group(1):
            line, arch, model = "Quadro RTX", "Turing", f"Quadro RTX {m.group(3)}"
        else:
            letter = m.group(2).upper()
            arch = {"P": "Pascal", "GP": "Pascal", "GV": "Volta", "M": "Maxwell", "K": "Kepler"}.get(letter)
            line, model = "Quadro", f"Quadro {letter}{m.group(3)}"
        return GpuProduct(name=name, line=line, generation=None, tier=None, suffix="",
                          mobile=_mobile(name), architecture=arch, model=model)
    # RTX A6000 (Ampere); RTX 6000 Ada Generation; RTX PRO 6000 Blackwell; RTX 2000 Ada
    m = re.search(r"\bRTX\s+(PRO\s+)?(A?)(\d{3,4})\b", name, re.IGNORECASE)
    if m and not re.search(r"GeForce", name, re.IGNORECASE):
        arch = _named_arch(name) or ("Ampere" if m.group(2) else None)
        pro = "PRO " if m.group(1) else ""
        return GpuProduct(name=name, line="RTX professional", generation=None, tier=None,
                          suffix="", mobile=_mobile(name), architecture=arch,
                          model=f"RTX {pro}{m.group(2).upper()}{m.group(3)}")
    return None


def _data_center(name: str) -> GpuProduct | None:
    # Tesla V100-SXM2-16GB, NVIDIA A100-SXM4-80GB, NVIDIA H100 80GB HBM3, NVIDIA GH200 480GB, A10G
    m = re.search(r"\b(GH|GB|[KMPVTALHB])(\d{1,3})([A-Z]?)\b", name.replace("-", " "))
    if not m:
        return None
    letter, digits, tail = m.group(1), m.group(2), m.group(3)
    model = f"{letter}{digits}{tail}"
    return GpuProduct(
        name=name, line="data center", generation=None, tier=None, suffix="",
        mobile=False, architecture=_DC_LETTER_ARCH.get(letter), model=model,
        form_factor=_form_factor(name), memory_gb=_memory_gb(name),
    )


def parse_gpu_name(name: str) -> GpuProduct:
    """Take an NVIDIA product name apart; unknown names come back with line "unknown"."""
    clean = " ".join(name.replace("(R)", "").replace("(TM)", "").split())
    m = re.search(r"\b(RTX|GTX|GT|MX)\s*(\d{3,4})\b(.*)$", clean, re.IGNORECASE)
    if m and re.search(r"GeForce", clean, re.IGNORECASE) or (
        m and m.group(1).upper() in ("GTX", "GT", "MX")
    ):
        return _geforce(clean, m)
    if re.search(r"\bTITAN\b", clean, re.IGNORECASE):
        return _titan(clean)
    pro = _professional(clean)
    if pro is not None:
        return pro
    if m and m.group(1).upper() == "RTX":  # "RTX 3090" without "GeForce"
        return _geforce(clean, m)
    dc = _data_center(clean)
    if dc is not None:
        return dc
    return GpuProduct(name=clean, line="unknown", generation=None, tier=None, suffix="",
                      mobile=_mobile(clean), architecture=None, model=clean)
