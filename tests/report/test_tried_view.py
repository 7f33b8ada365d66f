"""report/tried.py: the tried table keeps a lever's line to paste whole, in a column on a wide terminal and under the
table on a narrow one."""

from __future__ import annotations

from rich.console import Console, Group

from trainspeed.diagnose.tried import LossCheck, Tried, TriedLever
from trainspeed.diagnose.verdict import Lever
from trainspeed.report.tried import WIDE, tried_view

ROW = TriedLever("thread_oversubscription", Lever("threads", {"threads": 2}, "torch.set_num_threads(2)", False), 1.73,
                 2.78, (2.67, 2.90), [1.0] * 3, [0.36] * 3, LossCheck(150, True, 0.0, True, (150, 150)),
                 after="compute_bound")


def _text(width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(Group(*tried_view(Tried([ROW], [], 3, 150, 28.0))))
    return console.export_text()


def test_the_line_to_paste_is_never_folded() -> None:
    narrow, wide = _text(80), _text(WIDE)
    assert "torch.set_num_threads(2)" in narrow and "torch.set_num_threads(2)" in wide
    assert "applied as torch.set_num_threads(2); losses: the same" in narrow
    header = next(line for line in wide.splitlines() if line.startswith("verdict"))
    assert "applied as" in header and "applied as torch" not in wide
    assert "1.73x" in narrow and "2.78x [2.67, 2.90]" in narrow
