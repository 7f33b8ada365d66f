"""PNG plots of result objects (matplotlib's object API: no pyplot global state)."""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from trainspeed.demo.result import DemoResult
from trainspeed.watch.phases import PHASES
from trainspeed.watch.result import WatchResult


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def demo_loss_png(result: DemoResult) -> bytes:
    """Loss curves: every recorded loss of each variant, one panel per device."""
    fig = Figure(figsize=(6.4 * len(result.devices), 4.2))
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
    fig = Figure(figsize=(7.5, 4.2))
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
    fig = Figure(figsize=(8, 3.6))
    ax = fig.add_subplot(1, 1, 1)
    steps = w.step_samples
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
    fig = Figure(figsize=(6, 3.4))
    ax = fig.add_subplot(1, 1, 1)
    ax.hist(w.step_times_ms, bins=40, color="tab:blue")
    if w.median_ms is not None:
        ax.axvline(w.median_ms, color="black", linestyle="--", label=f"median {w.median_ms:.3f} ms")
        ax.legend(fontsize=8)
    ax.set_xlabel("step time, ms (measured)")
    ax.set_ylabel("steps")
    ax.set_title("Step-time distribution")
    return _png(fig)


def doctor_util_png(w: WatchResult) -> bytes | None:
    """GPU utilisation over time (None when unavailable)."""
    if not w.gpu_util.available or not w.gpu_util.timeline:
        return None
    fig = Figure(figsize=(8, 3.0))
    ax = fig.add_subplot(1, 1, 1)
    ts, us = zip(*w.gpu_util.timeline)
    ax.plot(ts, us, linewidth=0.8)
    ax.set_ylim(0, 105)
    ax.set_xlabel("seconds")
    ax.set_ylabel("GPU utilisation % (NVML)")
    ax.set_title("GPU utilisation" + (" - saw-tooth" if w.gpu_util.sawtooth else ""))
    return _png(fig)
