"""Human units, said on purpose: GiB is 1024**3 bytes."""

from __future__ import annotations

GIB = 1024**3


def gib(n: int | None) -> str:
    """Bytes as GiB with one decimal ("?" when unknown)."""
    return "?" if n is None else f"{n / GIB:.1f} GiB"
