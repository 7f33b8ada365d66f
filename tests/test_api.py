"""The public API is what __all__ says."""

from __future__ import annotations

import trainspeed


def test_all_names_exist() -> None:
    for name in trainspeed.__all__:
        assert hasattr(trainspeed, name), name
    assert trainspeed.__version__
    assert trainspeed.parse_gpu_name("NVIDIA GeForce RTX 4070").generation == 40
