"""The demo's plots render to PNG bytes."""

from __future__ import annotations

from trainspeed.demo import run_demo
from trainspeed.report.plots import demo_loss_png, demo_timing_png

PNG = b"\x89PNG\r\n\x1a\n"


def test_demo_plots_are_png() -> None:
    result = run_demo(["cpu"], epochs=20)
    assert demo_loss_png(result)[:8] == PNG
    assert demo_timing_png(result)[:8] == PNG


def test_sweep_plots_are_pngs() -> None:
    from trainspeed.report.plots import sweep_png
    from trainspeed.sweep.result import SweepPoint, SweepResult

    pts = [SweepPoint(str(b), 0.1 * b, 0.09 * b, 0.11 * b, True, extras={"samples_per_s": 10 / 0.1}) for b in (1, 2, 4)]
    r = SweepResult("batch-size", "mlp", "cpu", 10, 5, pts, findings={"knee": "2"})
    assert sweep_png(r)[:4] == b"\x89PNG"
    grid = {"widths": [16, 64], "batches": [8, 32], "cpu_ms": [[1.0, 2.0], [3.0, None]],
            "cuda_ms": [[2.0, 1.0], [1.0, 1.0]], "cuda_predicted": True, "gpu": "RTX 3080"}
    r = SweepResult("crossover", "mlp", "cpu", 10, 5, [], findings={"grid": grid})
    assert sweep_png(r)[:4] == b"\x89PNG"
    pts = [SweepPoint("1", 1.0, 0.9, 1.1, True, extras={"records": 10}),
           SweepPoint("never", 0.9, 0.85, 0.95, True, extras={"records": 0}),
           SweepPoint("cuda", 0.5, None, None, True, predicted=True)]
    r = SweepResult("record-every", "iris", "cpu", 10, 5, pts, findings={"fit": {"a": 0.9, "b": 0.01, "r2": 1.0}})
    assert sweep_png(r)[:4] == b"\x89PNG"


def test_the_cli_leaves_matplotlib_unimported_until_a_plot_is_drawn() -> None:
    # the doctor imports its renderers before it runs the script: matplotlib's objects would lengthen every full
    # garbage collection of the watched run
    import subprocess
    import sys

    code = "import sys, trainspeed.cli; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
