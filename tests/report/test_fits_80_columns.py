"""Tables at a CI log's 80 columns: columns are left out, or cells wrap, but no number is cut short ("671.6…")."""

from __future__ import annotations

import re

import torch
from rich.console import Console

from trainspeed.diagnose.compare import Change, Comparison
from trainspeed.report.text import compare_view, sweep_view
from trainspeed.sweep.result import SweepPoint, SweepResult

CUT = re.compile(r"\S*\d…(?![+\-]\d)")
"""A number cut short: a digit and an ellipsis that does not open the second number of an interval (`+3.2…+46.1%`).
(A long name cut, `CausalSelfAtte…`, is not a wrong figure.)"""


def render(view: object, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    console.print(view)
    return console.export_text()


def _change(what: str, a: float, b: float) -> Change:
    return Change(what, a, b, b - a, (b - a) * 1.2, (b - a) * 0.8, b / a - 1 if a else None,
                  low=(b / a - 1) * 1.2 if a else None, high=(b / a - 1) * 0.8 if a else None)


def test_compare_leaves_out_intervals_rather_than_cut_a_number() -> None:
    rows = [_change(name, a, b) for name, a, b in (("data", 0.004, 13.091), ("forward", 671.625, 240.117),
                                                    ("checkpoint", 18.346, 0.001), ("other", 1_542.75, 282.625))]
    c = Comparison("before-the-change.json", "after-the-change.json", _change("step", 2_233.1, 535.8), rows, [],
                   "faster", "after is 76% faster per step")
    for width in (80, 60):
        text = render(compare_view(c), width)
        assert not CUT.findall(text), text
        assert max(len(line) for line in text.splitlines()) <= width
    assert "671.625" in render(compare_view(c)) and "checkpoint" in render(compare_view(c))
    assert "interval" in render(compare_view(c), 120)  # where there is room, every column


def test_the_sweep_table_keeps_its_numbers_whole() -> None:
    points = [SweepPoint("as run", 1.5647, 1.5104, 1.6381, True, trials=3),
              SweepPoint("16", 0.9515, 0.9174, 0.9825, True, trials=3, extras={"vs_as_run": 1.65})]
    result = SweepResult("threads", "examples/a_rather_long_name_for_a_training_script.py", "script", 1, 3, points,
                         findings={"script_steps": 200})
    text = render(sweep_view(result))
    assert not CUT.findall(text), text


def test_the_memory_and_doctor_views_keep_their_numbers_whole() -> None:
    from recorded_runs import CTX, recorded
    from test_doctor_brief import MACHINE

    from trainspeed.diagnose.report import judge
    from trainspeed.memory import estimate_memory
    from trainspeed.memory.result import MemoryReport
    from trainspeed.workloads.zoo import ZOO

    gpt = ZOO["gpt"]
    est = estimate_memory(gpt.factory, lambda b: torch.randint(0, gpt.input_high or 2, (b, *gpt.input_shape)), 32)
    report = MemoryReport(model="gpt", estimate=est, search=None, measured=None, batch_size=32,
                          input_shape=list(gpt.input_shape), input_dtype="int64")
    doctor = judge(recorded(1_234.5, {"data": 567.8, "forward": 333.3, "backward": 321.1}), CTX, MACHINE)
    for view in (report, doctor):
        text = render(view)
        assert not CUT.findall(text), text
