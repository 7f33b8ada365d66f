"""PNG plots of result objects (matplotlib's object API: no pyplot global state)."""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from trainspeed.demo.result import DemoResult


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
