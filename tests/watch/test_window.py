"""watch/window.py: a window of a real run. The steps before it only count themselves, its steps are measured as a
run's are, and as it closes every hook comes out and the report is made while the loop waits; the loop then runs on
as if never watched (the same losses, bit for bit; every patched attribute the original again)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.utils.data.dataloader as dataloader_module
from torch.optim import optimizer as optim_module

import trainspeed
from trainspeed.diagnose.report import DoctorReport
from trainspeed.errors import UsageError
from trainspeed.watch.window import WindowSpec, parse_window


def _patched_now() -> dict[str, Any]:
    """Every attribute the watcher or the closer patches, as it stands now."""
    return {"call": torch.nn.Module.__dict__["__call__"], "train": torch.nn.Module.train, "save": torch.save,
            "item": torch.Tensor.__dict__.get("item"), "tolist": torch.Tensor.__dict__.get("tolist"),
            "to": torch.Tensor.__dict__.get("to"), "next": dataloader_module._BaseDataLoaderIter.__next__,
            "iter": dataloader_module.DataLoader.__iter__, "zero_grad": torch.optim.Optimizer.zero_grad,
            "backward": torch.autograd.backward, "init": torch.optim.Optimizer.__init__,
            "no_grad": torch.no_grad.__enter__, "post_hooks": len(optim_module._global_optimizer_post_hooks),
            "pre_hooks": len(optim_module._global_optimizer_pre_hooks)}


def _train(steps: int, at: Callable[[int], None] = lambda step: None, optimizer: bool = True,
           save_every: int = 0) -> list[float]:
    """A seeded MLP's loop of `steps` steps: its losses (read every step, as scripts do), `at(step)` after each."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    losses = []
    for step in range(steps):
        if optimizer:
            opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if optimizer:
            opt.step()
        else:
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.05 * p.grad
                    p.grad = None
        losses.append(loss.item())
        if save_every and step % save_every == 0:
            torch.save(model.state_dict(), io.BytesIO())
        at(step)
    return losses


@pytest.mark.parametrize("text, spec", [("50:150", WindowSpec(50, 150)), ("0:10", WindowSpec(0, 10)),
                                        ("120s", WindowSpec(0, seconds=120.0)), (" 2.5s ", WindowSpec(0, seconds=2.5))])
def test_a_window_is_steps_or_seconds(text: str, spec: WindowSpec) -> None:
    assert parse_window(text) == spec
    assert parse_window(spec.text) == spec


@pytest.mark.parametrize("text, said", [
    ("150:50", "the first step must come before the last"), ("50:50", "the first step must come before the last"),
    ("50:55", "a window holds 10 steps or more"), ("-1:40", "no negative value"), ("-5s", "no negative value"),
    ("0s", "longer than 0 s"), ("50-150", "expected steps A:B (say 50:150) or seconds Ns (say 120s)"),
    ("", "expected steps A:B")])
def test_a_window_that_cannot_be_is_said_in_one_line(text: str, said: str) -> None:
    with pytest.raises(UsageError, match="^--window") as e:
        parse_window(text)
    assert said in str(e.value) and "\n" not in str(e.value)


def test_the_window_is_reported_as_it_closes_and_the_loop_runs_on_unwatched() -> None:
    plain = _train(120)
    originals = _patched_now()
    reported: list[tuple[int, DoctorReport]] = []
    step_now = [0]
    after: list[dict[str, Any]] = []

    def at(step: int) -> None:
        step_now[0] = step
        if step == 100:
            after.append(_patched_now())

    with trainspeed.watch(window=(20, 60), on_report=lambda r: reported.append((step_now[0], r))) as w:
        watched = _train(120, at)
    assert watched == plain  # bit for bit
    assert len(reported) == 1
    closed_during, report = reported[0]
    assert closed_during == 59  # made after step 59's end, at the next step's first call: the loop waited for it
    window = report.watch.run_window
    assert window is not None and (window.asked, window.opened_at, window.closed_at, window.ended_at) == \
        ("20:60", 20, 60, None)
    assert window.held_s is not None and window.held_s > 0
    assert report.watch.steps.seen == 40
    assert w.result() is report
    assert after == [originals]  # every hook out after the window, while the loop ran on
    # the reads counted are the window's: one loss.item() a step
    (site,) = [s for s in report.watch.reads.host_read_sites if "losses.append" in (s.code or "")]
    assert site.count == 40


def test_the_window_counts_the_saves_made_inside_it_only() -> None:
    with trainspeed.watch(window=(30, 70)) as w:
        _train(100, save_every=5)
    saves = w.measurements().checkpoints
    assert saves.saves == 8 and saves.every_steps == 5  # steps 30, 35, ..., 65


def test_a_run_that_ends_inside_or_before_the_window_says_so() -> None:
    reported: list[DoctorReport] = []
    with trainspeed.watch(window=(20, 200), on_report=reported.append) as w:
        _train(50)
    assert reported == []  # the window never closed: the report is the run's end's, as without a window
    window = w.measurements().run_window
    assert window is not None and (window.opened_at, window.closed_at, window.ended_at) == (20, None, 50)
    assert w.measurements().steps.seen == 30
    with trainspeed.watch(window=(80, 100)) as w:
        _train(50)
    m = w.measurements()
    assert m.run_window is not None and (m.run_window.opened_at, m.run_window.ended_at) == (None, 50)
    assert m.steps.seen == 0 and m.steps.median_ms is None


def test_a_loop_without_an_optimizer_has_its_window_too() -> None:
    plain = _train(80, optimizer=False)
    with trainspeed.watch(window=(10, 40)) as w:
        watched = _train(80, optimizer=False)
    assert watched == plain
    m = w.measurements()
    assert m.run_window is not None and (m.run_window.opened_at, m.run_window.closed_at) == (10, 40)
    assert m.steps.seen == 30


def test_a_window_of_seconds_closes_after_them() -> None:
    reported: list[DoctorReport] = []
    originals = _patched_now()
    with trainspeed.watch(window="0.2s", on_report=reported.append):
        losses = _train(3000)
        assert _patched_now() == originals  # closed long before the loop's end (a step takes well under 1 ms)
    assert len(losses) == 3000 and len(reported) == 1
    window = reported[0].watch.run_window
    assert window is not None and window.opened_at == 0 and window.closed_at == reported[0].watch.steps.seen > 0


def test_window_and_steps_do_not_go_together() -> None:
    with pytest.raises(UsageError, match="window= and steps= do not go together"):
        trainspeed.watch(window=(10, 40), steps=20)
