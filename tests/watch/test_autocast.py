"""torch.autocast seen around the warm-up's training calls: the doctor does not advise what the script does."""

from __future__ import annotations

import torch
from torch import nn
from watched_loops import tiny_step

from trainspeed.watch import Watcher
from trainspeed.watch.autocast import autocast_dtype


def test_the_autocast_dtype_is_read_where_autocast_is_on() -> None:
    assert autocast_dtype("cpu") is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert autocast_dtype("cpu") == "bfloat16"
        assert autocast_dtype("cuda") is None  # another device's autocast is off
    assert autocast_dtype("no-such-device") is None


def _losses(autocast: bool, watched: bool) -> tuple[list[float], str | None]:
    torch.manual_seed(0)  # the same batch in each run
    model, optimizer, x = tiny_step()
    y = torch.arange(8) % 3
    losses: list[float] = []

    def run() -> None:
        for _ in range(12):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())

    if not watched:
        run()
        return losses, None
    with Watcher(warmup=2) as w:  # the profiler window included
        run()
    return losses, w.measurements().model.autocast


def test_a_run_under_autocast_is_recorded_so_and_its_losses_are_the_same() -> None:
    plain, _ = _losses(autocast=True, watched=False)
    watched, dtype = _losses(autocast=True, watched=True)
    assert dtype == "bfloat16" and watched == plain  # bit for bit
    assert _losses(autocast=False, watched=True)[1] is None
