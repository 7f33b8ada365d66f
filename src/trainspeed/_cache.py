"""Where trainspeed keeps what it learnt on this machine between runs: `$XDG_CACHE_HOME/trainspeed`, else
`~/.cache/trainspeed` (fit's compile times, the CPU's description)."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "trainspeed"
