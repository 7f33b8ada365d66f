"""The result objects render themselves (`trainspeed._render.Renders`): `str()` and rich's console show the type's
terminal view, a notebook's `_repr_html_` its HTML view, each the one view `report/views.py` has for the type."""

from __future__ import annotations

import io

import pytest
from recorded_runs import CTX, recorded
from rich.console import Console

from trainspeed.diagnose.report import judge
from trainspeed.report import views
from trainspeed.report.doctor_brief import brief_view
from trainspeed.report.html import doctor_html
from trainspeed.report.text import hardware_view


def _text(renderable: object) -> str:
    console = Console(width=100, record=True, color_system=None, force_terminal=False, file=io.StringIO())
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


def _report():  # type: ignore[no-untyped-def]
    from test_golden import MACHINE

    return judge(recorded(0.26, {"forward": 0.07, "backward": 0.09, "optimizer": 0.05}, ops=42, flops=9.6e4), CTX,
                 MACHINE)


def test_a_doctor_report_prints_as_its_view_and_shows_its_html_page_in_a_notebook() -> None:
    report = _report()
    assert str(report) == _text(brief_view(report)) and "Verdicts, most important first" in str(report)
    assert _text(report) == _text(brief_view(report))  # rich's console asks __rich__
    page = report._repr_html_()
    assert page.startswith("<iframe srcdoc=") and views.framed(doctor_html(report)) == page


def test_the_other_results_show_their_terminal_view_preformatted() -> None:
    from test_golden import MACHINE

    assert str(MACHINE) == _text(hardware_view(MACHINE))
    assert MACHINE._repr_html_() == views.pre(hardware_view(MACHINE))
    assert repr(MACHINE).startswith("HardwareReport(")  # the dataclass's repr stays the debugging view


def test_every_result_type_has_a_view_and_nothing_else_does() -> None:
    from trainspeed._render import Renders

    def subclasses(cls: type) -> set[type]:
        return {c for s in cls.__subclasses__() for c in (s, *subclasses(s))}

    import trainspeed.demo.result  # noqa: E401, F401
    import trainspeed.diagnose.compare
    import trainspeed.memory.result
    import trainspeed.sweep.result  # noqa: F401

    assert subclasses(Renders) <= set(views.VIEWS) and len(views.VIEWS) == 7
    with pytest.raises(TypeError, match="no view of a object"):
        views.view_of(object())
