"""A framework callback's `window=` (integrations/session.py, which both callbacks share): the report written as the
window closes while training goes on, nothing more at the training's end; bad windows refused as the callback is
made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from trainspeed.errors import UsageError
from trainspeed.integrations.session import CallbackSession


def test_the_callbacks_window_writes_its_report_as_it_closes(tmp_path: Path) -> None:
    report = tmp_path / "doctor.json"
    session = CallbackSession(json=report, summary=False, window=(10, 40))
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    session.begin()  # on_train_start / on_train_begin
    written_at = None
    for step in range(80):
        opt.zero_grad()
        model(torch.randn(16, 8)).pow(2).mean().backward()
        opt.step()
        if written_at is None and report.exists():
            written_at = step
    session.end()  # on_train_end: the window's report stands
    assert written_at == 40
    data = json.loads(report.read_text())
    assert (data["window"]["opened_at"], data["window"]["closed_at"], data["steps"]["seen"]) == (10, 40, 30)
    assert session.report is not None and session.report.watch.run_window.closed_at == 40


def test_a_window_that_cannot_be_is_refused_as_the_callback_is_made() -> None:
    with pytest.raises(UsageError, match="the first step must come before the last"):
        CallbackSession(window=(40, 10))
