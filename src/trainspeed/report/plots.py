"""PNG plots of result objects (matplotlib's object API: no pyplot global state).

matplotlib is imported when a plot is drawn, not with this module: `trainspeed doctor` imports its renderers
before it runs the script, and matplotlib's 46 000 Python objects would lengthen every full garbage collection
of the watched run (about 290 000 objects in a small script's process).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

from trainspeed.demo.result import DemoResult
from trainspeed.sweep.result import SweepResult
from trainspeed.watch.phases import PHASES
from trainspeed.watch.result import WatchResult


def _figure(**kwargs: Any) -> Figure:
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def demo_loss_png(result: DemoResult) -> bytes:
    """Loss curves: every recorded loss of each variant, one panel per device."""
    fig = _figure(figsize=(6.4 * len(result.devices), 4.2))
    for i, device in enumerate(result.devices):
        ax = fig.add_subplot(1, len(result.devices), i + 1)
        for r in result.runs:
            if r.device != device or not r.losses:
                continue
            style = {"seed": "-", "sync_free": "--"}.get(r.variant, "")
            marker = "o" if r.variant == "record_every_200" else None
            ax.plot(r.recorded_epochs, r.losses, linestyle=style or "none", marker=marker,
                    markersize=3, label=f"{r.variant} ({r.records} records)")
        ax.set_xlabel("epoch")
        ax.set_ylabel("training loss")
        ax.set_yscale("log")
        ax.set_title(f"Iris MLP on {device.upper()}")
        ax.legend()
    return _png(fig)


def demo_timing_png(result: DemoResult) -> bytes:
    """Bars of microseconds per epoch for each device and variant, host reads annotated."""
    fig = _figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    labels = [f"{r.device}\n{r.variant}" for r in result.runs]
    values = [r.us_per_epoch for r in result.runs]
    colors = ["tab:blue" if r.device == "cpu" else "tab:green" for r in result.runs]
    bars = ax.bar(range(len(values)), values, color=colors)
    for bar, r in zip(bars, result.runs):
        label = f"{r.syncs} host read" + ("" if r.syncs == 1 else "s")
        ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(values)), labels, fontsize=8)
    ax.set_ylabel("microseconds per epoch (measured)")
    ax.set_title(f"Seed Iris job, {result.epochs} epochs: time per epoch")
    return _png(fig)


def doctor_phases_png(w: WatchResult) -> bytes:
    """Stacked bars: each sampled step split into its phases (host milliseconds)."""
    fig = _figure(figsize=(8, 3.6))
    ax = fig.add_subplot(1, 1, 1)
    steps = w.steps.samples
    xs = [r.index for r in steps]
    bottom = [0.0] * len(steps)
    for phase in PHASES:
        ys = [r.phases[phase] * 1e3 for r in steps]
        if any(ys):
            ax.bar(xs, ys, bottom=bottom, width=1.0, label=phase)
            bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_xlabel("step")
    ax.set_ylabel("host ms (measured)")
    ax.set_title("Each step, split into phases")
    ax.legend(fontsize=7, ncol=4)
    return _png(fig)


def doctor_histogram_png(w: WatchResult) -> bytes:
    """Histogram of measured step times."""
    fig = _figure(figsize=(6, 3.4))
    ax = fig.add_subplot(1, 1, 1)
    ax.hist(w.steps.times_ms, bins=40, color="tab:blue")
    if w.steps.median_ms is not None:
        ax.axvline(w.steps.median_ms, color="black", linestyle="--", label=f"median {w.steps.median_ms:.3f} ms")
        ax.legend(fontsize=8)
    ax.set_xlabel("step time, ms (measured)")
    ax.set_ylabel("steps")
    ax.set_title("Step-time distribution")
    return _png(fig)


def doctor_util_png(w: WatchResult) -> bytes | None:
    """GPU utilisation over time (None when unavailable)."""
    if not w.gpu_util.available or not w.gpu_util.timeline:
        return None
    fig = _figure(figsize=(8, 3.0))
    ax = fig.add_subplot(1, 1, 1)
    ts, us = zip(*w.gpu_util.timeline)
    ax.plot(ts, us, linewidth=0.8)
    ax.set_ylim(0, 105)
    ax.set_xlabel("seconds")
    ax.set_ylabel("GPU utilisation % (NVML)")
    ax.set_title("GPU utilisation" + (" - saw-tooth" if w.gpu_util.sawtooth else ""))
    return _png(fig)


def _numeric(values: list[str]) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


def sweep_png(result: SweepResult) -> bytes:
    """Median time per step with its 95% interval per value (throughput for batch-size); the
    crossover grid as a heat map of CPU time / GPU time."""
    grid = result.findings.get("grid")
    if grid:
        return _crossover_png(result, grid)
    fig = _figure(figsize=(7, 4))
    ax = fig.add_subplot()
    points = [p for p in result.points if p.ok]
    labels = [p.value for p in points]
    if result.knob == "batch-size":
        ys = [p.extras.get("samples_per_s", 0.0) for p in points]
        low = [y - int(p.value) * result.steps / p.interval[1] for y, p in zip(ys, points)]
        high = [int(p.value) * result.steps / p.interval[0] - y for y, p in zip(ys, points)]
        ax.set_ylabel("samples / s (median, 95% interval)")
    else:
        ys = [p.seconds / result.steps * 1e3 for p in points]
        low = [0.0 if p.predicted else y - p.interval[0] / result.steps * 1e3 for y, p in zip(ys, points)]
        high = [0.0 if p.predicted else p.interval[1] / result.steps * 1e3 - y for y, p in zip(ys, points)]
        ax.set_ylabel("ms per step (median, 95% interval)")
    xs = _numeric(labels) if result.knob in ("batch-size", "threads") else None
    if xs is None:
        xs = list(range(len(labels)))
        ax.set_xticks(xs, labels, rotation=30 if len(labels) > 6 else 0)
    elif result.knob == "batch-size":
        ax.set_xscale("log", base=2)
    colours = ["#bbbbbb" if p.predicted else "#1f77b4" for p in points]
    ax.errorbar(xs, ys, yerr=[low, high], fmt="none", ecolor="#444444", capsize=3)
    ax.scatter(xs, ys, c=colours, zorder=3)
    ax.plot(xs, ys, color="#1f77b4", alpha=0.4)
    knee = result.findings.get("knee")
    if knee in labels:
        i = labels.index(knee)
        ax.annotate("knee", (xs[i], ys[i]), textcoords="offset points", xytext=(0, 10), ha="center")
    fit = result.findings.get("fit")
    if fit:
        secondary = ax.twiny()
        secondary.set_xlim(ax.get_xlim())
        secondary.set_xticks(xs, [str(int(p.extras.get("records", 0))) for p in points])
        secondary.set_xlabel("records per trial")
    ax.set_xlabel(result.knob)
    ax.set_title(f"{result.knob} on {result.workload} ({result.device})" + (" - grey: predicted" if any(
        p.predicted for p in points) else ""), fontsize=10, pad=32 if fit else 6)
    ax.set_ylim(bottom=0)
    return _png(fig)


def _crossover_png(result: SweepResult, grid: dict) -> bytes:
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    ratio = np.full((len(grid["widths"]), len(grid["batches"])), np.nan)
    for i in range(len(grid["widths"])):
        for j in range(len(grid["batches"])):
            c, d = grid["cpu_ms"][i][j], grid["cuda_ms"][i][j]
            if c and d:
                ratio[i, j] = np.log2(c / d)
    fig = _figure(figsize=(6, 4.5))
    ax = fig.add_subplot()
    bound = max(1.0, float(np.nanmax(np.abs(ratio))) if np.isfinite(ratio).any() else 1.0)
    im = ax.imshow(ratio, cmap="RdYlGn", norm=TwoSlopeNorm(0.0, -bound, bound), origin="lower", aspect="auto")
    for i in range(ratio.shape[0]):
        for j in range(ratio.shape[1]):
            if np.isfinite(ratio[i, j]):
                ax.text(j, i, f"{2 ** ratio[i, j]:.2g}x", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(grid["batches"])), [str(b) for b in grid["batches"]])
    ax.set_yticks(range(len(grid["widths"])), [str(w) for w in grid["widths"]])
    ax.set_xlabel("batch size")
    ax.set_ylabel("model width")
    label = f"predicted {grid['gpu']}" if grid["cuda_predicted"] else "measured GPU"
    ax.set_title(f"CPU time / GPU time ({label}); green: the GPU wins", fontsize=10)
    fig.colorbar(im, ax=ax, label="log2(CPU time / GPU time)")
    return _png(fig)
