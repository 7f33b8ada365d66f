"""Each result type's views: its terminal view (rich) and its HTML view, as the result objects render themselves
(`trainspeed._render.Renders`: `print(result)`, rich's console, a notebook's bare expression)."""

from __future__ import annotations

import html
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console, RenderableType

from trainspeed.demo.result import DemoResult
from trainspeed.diagnose.compare import Comparison
from trainspeed.diagnose.report import DoctorReport
from trainspeed.hardware.report import HardwareReport
from trainspeed.memory.result import MemoryEstimate, MemoryReport
from trainspeed.report.doctor_brief import brief_view
from trainspeed.report.html import doctor_html
from trainspeed.report.memory_text import memory_view
from trainspeed.report.text import compare_view, demo_view, hardware_view, sweep_view
from trainspeed.sweep.result import SweepResult

REPORT_HEIGHT_PX = 900
"""The height of a notebook's frame around the doctor's HTML report."""

PRE_WIDTH = 110
"""Columns of a terminal view shown as preformatted text in a notebook."""


@dataclass(frozen=True)
class View:
    """A result type's terminal view, and its HTML view (None: the terminal view, preformatted)."""

    text: Callable[[Any], RenderableType]
    page: Callable[[Any], str] | None = None

    def html(self, result: Any) -> str:
        if self.page is not None:
            return framed(self.page(result))
        return pre(self.text(result))


def framed(page: str, height: int = REPORT_HEIGHT_PX) -> str:
    """A whole HTML page shown inside a notebook's output: in an iframe, so that its styles stay its own."""
    return (f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width: 100%; height: {height}px; border: 0"'
            ' sandbox="allow-same-origin"></iframe>')


def pre(renderable: RenderableType) -> str:
    """A rich renderable as preformatted text (the terminal's view, without colour)."""
    console = Console(width=PRE_WIDTH, record=True, color_system=None, force_terminal=False, force_jupyter=False,
                      file=io.StringIO())  # in a notebook rich would display what it prints: this only records
    console.print(renderable)
    return f"<pre>{html.escape(console.export_text())}</pre>"


def _estimate_view(estimate: MemoryEstimate) -> RenderableType:
    """A bare estimate (`trainspeed.estimate_memory`) as the memory command shows it."""
    return memory_view(MemoryReport(model="the model", estimate=estimate, search=None, measured=None,
                                    batch_size=estimate.batch_size, input_shape=[], input_dtype=""))


VIEWS: dict[type, View] = {
    DoctorReport: View(brief_view, doctor_html),
    MemoryReport: View(memory_view),
    MemoryEstimate: View(_estimate_view),
    SweepResult: View(sweep_view),
    Comparison: View(compare_view),
    HardwareReport: View(hardware_view),
    DemoResult: View(demo_view),
}


def view_of(result: Any) -> View:
    """The views of `result`'s type (or of the nearest of its bases that has them)."""
    for cls in type(result).__mro__:
        if cls in VIEWS:
            return VIEWS[cls]
    raise TypeError(f"no view of a {type(result).__name__}")
