"""Byte sizes, said on purpose: GiB is 1024**3 bytes, GB is 10**9."""

from __future__ import annotations

import re

GIB = 1024**3
_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}


def gib(n: int | None) -> str:
    """Bytes as GiB with one decimal ("?" when unknown)."""
    return "?" if n is None else f"{n / GIB:.1f} GiB"


def human_bytes(n: int | float | None) -> str:
    """Bytes in the largest binary unit that keeps the number >= 1 ("3.2 MiB")."""
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def parse_size(text: str) -> int:
    """"24GiB", "24 GB", "512MiB", "1e9" -> bytes. Raises ValueError on anything else."""
    m = re.fullmatch(r"\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (try 24GiB, 512MiB, 16GB)")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if value <= 0:
        raise ValueError(f"a size must be positive, got {text!r}")
    if value < 1:
        raise ValueError(f"a size must be at least one byte, got {text!r}")
    return int(value)
