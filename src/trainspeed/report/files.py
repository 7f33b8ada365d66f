"""The doctor's report written as files: the same for `trainspeed doctor` and the framework callbacks."""

from __future__ import annotations

from pathlib import Path

from trainspeed._io import emit, write_atomic
from trainspeed.diagnose.report import DoctorReport
from trainspeed.report.json import doctor_dict, dumps


def write_doctor_report(report: DoctorReport, *, folder: Path | None = None, html: str | None = None,
                        json: str | None = None) -> None:
    """`doctor.json` and `report.html` in `folder`, the HTML report at `html`, the JSON object at `json` ("-":
    stdout); each file written atomically, the HTML page rendered once for both."""
    payload = dumps(doctor_dict(report))
    page = ""
    if folder is not None or html:
        from trainspeed.report.html import doctor_html  # jinja2 and matplotlib, only for a page

        page = doctor_html(report)
    if folder is not None:
        write_atomic(folder / "doctor.json", payload)
        write_atomic(folder / "report.html", page)
    if html:
        write_atomic(html, page)
    if json:
        emit(json, payload)
