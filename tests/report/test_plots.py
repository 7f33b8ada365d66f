"""The demo's plots render to PNG bytes."""

from __future__ import annotations

from trainspeed.demo import run_demo
from trainspeed.report.plots import demo_loss_png, demo_timing_png

PNG = b"\x89PNG\r\n\x1a\n"


def test_demo_plots_are_png() -> None:
    result = run_demo(["cpu"], epochs=20)
    assert demo_loss_png(result)[:8] == PNG
    assert demo_timing_png(result)[:8] == PNG
