"""Sizes: binary and decimal units said on purpose."""

from __future__ import annotations

import pytest

from trainspeed.units import human_bytes, parse_size


@pytest.mark.parametrize(("text", "value"), [
    ("24GiB", 24 * 2**30), ("24 GB", 24 * 10**9), ("512MiB", 512 * 2**20), ("1e9", 10**9),
    ("1.5G", int(1.5 * 2**30)), ("100", 100), ("8kb", 8000), ("1e-3GB", 10**6), ("+2KiB", 2048),
])
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["24XB", "", "GiB", "-3GB", "0", "twelve", "0.5", "+-1GB"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_human_bytes() -> None:
    assert human_bytes(512) == "512 B" and human_bytes(3 * 2**20) == "3.0 MiB" and human_bytes(None) == "?"
