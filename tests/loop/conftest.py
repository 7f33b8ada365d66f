"""Fixtures of the fast loop's tests."""

from __future__ import annotations

import pytest

from trainspeed.workloads.iris import IrisSplit, load_iris_split


@pytest.fixture(scope="session")
def iris() -> IrisSplit:
    return load_iris_split()


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch) -> None:
    """Compile-time records go to a temporary folder, never the user's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
