"""trainspeed.integrations.lightning.TrainspeedCallback: the doctor from inside Lightning's Trainer."""

from __future__ import annotations

import json
import runpy
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

L = pytest.importorskip("lightning", reason="the lightning extra is not installed")

from planted import first_planted  # noqa: E402 - tests/diagnose, on pytest's pythonpath

from trainspeed.integrations.lightning import TrainspeedCallback  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                                        "ignore::UserWarning:lightning.*", "ignore::UserWarning:torch.*")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "frameworks" / "lightning_trainer.py"


class _Net(L.LightningModule):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        self.losses: list[float] = []

    def training_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(callbacks: list[Any]) -> _Net:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,)))
    model = _Net()
    trainer = L.Trainer(max_steps=30, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks)
    trainer.fit(model, DataLoader(data, batch_size=16, shuffle=True))
    return model


def test_the_callback_reports_the_run_and_leaves_its_losses_bit_for_bit(tmp_path: Path) -> None:
    plain = _fit([])
    callback = TrainspeedCallback(json=tmp_path / "doctor.json", summary=False)
    watched = _fit([callback])
    assert watched.losses == plain.losses
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), watched.parameters()))
    data = json.loads((tmp_path / "doctor.json").read_text())
    assert data["schema"] == "trainspeed.doctor/1" and data["steps"]["seen"] == 30 and data["batch_size"] == 16
    assert data["framework"]["name"] == "lightning" and callback.report is not None


@pytest.mark.planted
def test_the_callback_names_what_the_doctor_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "callback.json"
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), "--val-check-interval", "2", "--trainspeed-json", str(out)])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    data = json.loads(out.read_text())
    assert (data["evaluation"]["in_run"], data["evaluation"]["every_steps"]) == (60, 2)  # the sanity check ran before
    first = first_planted(data, "evaluation_heavy")
    assert first["id"] == "evaluation_heavy" and first["action"].startswith("Trainer(val_check_interval=8)")


def test_an_error_of_trainspeeds_is_said_once_and_training_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainspeed.doctor import Doctor

    def broken(self: Doctor) -> Any:
        raise RuntimeError("a bug in the report")

    monkeypatch.setattr(Doctor, "result", broken)
    plain = _fit([])
    callback = TrainspeedCallback(summary=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        watched = _fit([callback])
    said = [w for w in caught if "trainspeed stopped watching" in str(w.message)]
    assert len(said) == 1 and "a bug in the report" in str(said[0].message)
    assert watched.losses == plain.losses and callback.report is None


def test_a_callback_attached_twice_writes_one_report(tmp_path: Path) -> None:
    first, second = (TrainspeedCallback(json=tmp_path / f"{n}.json", summary=False) for n in ("a", "b"))
    with pytest.warns(RuntimeWarning, match="already watching this run"):
        _fit([first, second])
    assert (tmp_path / "a.json").exists() and not (tmp_path / "b.json").exists()


def test_a_report_path_that_cannot_be_written_is_said_before_training(tmp_path: Path) -> None:
    from trainspeed.errors import UsageError

    with pytest.raises(UsageError):
        TrainspeedCallback(json=tmp_path / "missing" / "doctor.json")
