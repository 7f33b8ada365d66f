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
import shlex
import time
from typing import Any

from trainspeed._io import check_writable_file, new_run_dir, write_atomic
from trainspeed.cli._common import Parser, non_negative_int, positive_int
from trainspeed.diagnose.report import DoctorReport
from trainspeed.doctor import Doctor
from trainspeed.errors import UsageError
from trainspeed.report.files import write_doctor_report
from trainspeed.report.json import doctor_dict, dumps


def _parser() -> Parser:
    p = Parser(prog="%%trainspeed", description="watch the training in this cell and show the doctor's report")
    p.add_argument("--steps", type=positive_int, default=None, help="stop watching (and the cell) after N steps")
    p.add_argument("--warmup", type=non_negative_int, default=None,
                   help="steps left out of the statistics (default 3, or 1 where the first step takes a second or more)")
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
    """`%load_ext trainspeed`: the `%%trainspeed` cell magic (the result objects render themselves: `_repr_html_`)."""
    def trainspeed(line: str, cell: str) -> DoctorReport | None:
        return run_cell(ipython, line, cell)

    trainspeed.__doc__ = _parser().format_help()
    ipython.register_magic_function(trainspeed, magic_kind="cell", magic_name="trainspeed")
