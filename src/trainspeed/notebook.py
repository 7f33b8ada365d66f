"""trainspeed in Jupyter and IPython: `%load_ext trainspeed`, then a `%%trainspeed` cell watches the training in the
cell and shows the doctor's report inline; the result objects render themselves as HTML in a bare expression.

    %load_ext trainspeed

    %%trainspeed --steps 300 --json report.json
    for x, y in loader:
        ...

Options as `trainspeed doctor`'s: `--steps`, `--warmup`, `--json PATH`, `--out DIR`, `--html PATH`. The report is
also left in the notebook's namespace as `trainspeed_report`. IPython is imported only here (the `notebook` extra).
"""

from __future__ import annotations

import dataclasses
import html
import io
import shlex
import time
from typing import Any

from trainspeed._io import check_writable_file, new_run_dir, write_atomic
from trainspeed.cli._common import Parser, non_negative_int, positive_int
from trainspeed.diagnose.compare import Comparison
from trainspeed.diagnose.report import DoctorReport
from trainspeed.doctor import Doctor
from trainspeed.errors import UsageError
from trainspeed.memory.result import MemoryEstimate, MemoryReport
from trainspeed.report.files import write_doctor_report
from trainspeed.report.html import doctor_html
from trainspeed.report.json import doctor_dict, dumps
from trainspeed.report.text import compare_view, memory_view, sweep_view
from trainspeed.sweep.result import SweepResult

REPORT_HEIGHT_PX = 900


def framed(page: str, height: int = REPORT_HEIGHT_PX) -> str:
    """A whole HTML page shown inside a notebook's output: in an iframe, so that its styles stay its own."""
    return (f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width: 100%; height: {height}px; border: 0"'
            ' sandbox="allow-same-origin"></iframe>')


def _pre(renderable: Any) -> str:
    """A rich renderable as preformatted text (the terminal's view, without colour)."""
    from rich.console import Console

    console = Console(width=110, record=True, color_system=None, force_terminal=False, file=io.StringIO())
    console.print(renderable)
    return f"<pre>{html.escape(console.export_text())}</pre>"


def report_html(report: DoctorReport) -> str:
    return framed(doctor_html(report))


def memory_html(estimate: MemoryEstimate) -> str:
    report = MemoryReport(model="the model", estimate=estimate, search=None, measured=None,
                          batch_size=estimate.batch_size, input_shape=[], input_dtype="")
    return _pre(memory_view(report))


def memory_report_html(report: MemoryReport) -> str:
    return _pre(memory_view(report))


def comparison_html(c: Comparison) -> str:
    return _pre(compare_view(c))


def sweep_html(result: SweepResult) -> str:
    return _pre(sweep_view(result))


RENDERERS: dict[type, Any] = {DoctorReport: report_html, MemoryEstimate: memory_html, MemoryReport: memory_report_html,
                              Comparison: comparison_html, SweepResult: sweep_html}
"""What each result object looks like in a notebook: the doctor's HTML report, the terminal's views of the others."""


def register_formatters(ipython: Any) -> None:
    """A bare expression holding a result object renders it (IPython's HTML formatter, per type)."""
    formatter = ipython.display_formatter.formatters["text/html"]
    for cls, render in RENDERERS.items():
        formatter.for_type(cls, render)


def _parser() -> Parser:
    p = Parser(prog="%%trainspeed", description="watch the training in this cell and show the doctor's report")
    p.add_argument("--steps", type=positive_int, default=None, help="stop watching (and the cell) after N steps")
    p.add_argument("--warmup", type=non_negative_int, default=3, help="steps left out of the statistics")
    p.add_argument("--json", metavar="PATH", default=None, help="write the report's JSON to PATH")
    p.add_argument("--html", metavar="PATH", default=None, help="write the HTML report to PATH")
    p.add_argument("--out", metavar="DIR", default=None, help="write doctor.json and report.html in a new folder")
    return p


def run_cell(ipython: Any, line: str, cell: str) -> DoctorReport | None:
    """The `%%trainspeed` magic: the cell run under the doctor, its report returned (and so displayed)."""
    try:
        args = _parser().parse_args(shlex.split(line))
        for path in (args.json, args.html):
            if path:
                check_writable_file(path)
    except UsageError as e:
        print(f"trainspeed: error: {e}")
        return None
    code = ipython.transform_cell(cell)
    filename = ipython.compile.cache(code, ipython.execution_count)  # the cell's lines, as tracebacks show them
    doctor = Doctor(warmup=args.warmup, steps=args.steps)
    with doctor:
        exec(compile(code, filename, "exec"), ipython.user_ns)  # noqa: S102 - the user's own cell
    report = dataclasses.replace(doctor.result(), script="notebook cell", command=f"%%trainspeed {line}".rstrip(),
                                 when=time.strftime("%Y-%m-%d %H:%M"))
    if args.json:
        write_atomic(args.json, dumps(doctor_dict(report)))
    folder = new_run_dir(args.out, "doctor") if args.out else None
    write_doctor_report(report, folder=folder, html=args.html)
    ipython.user_ns["trainspeed_report"] = report
    return report


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext trainspeed`: the `%%trainspeed` cell magic, and HTML views of the result objects."""
    def trainspeed(line: str, cell: str) -> DoctorReport | None:
        return run_cell(ipython, line, cell)

    trainspeed.__doc__ = _parser().format_help()
    ipython.register_magic_function(trainspeed, magic_kind="cell", magic_name="trainspeed")
    register_formatters(ipython)
