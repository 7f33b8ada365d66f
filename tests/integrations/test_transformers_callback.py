"""trainspeed.integrations.transformers.TrainspeedCallback: the doctor from inside Hugging Face's Trainer."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

hf = pytest.importorskip("transformers", reason="the transformers extra is not installed")
pytest.importorskip("accelerate", reason="the transformers extra is not installed (Trainer needs accelerate)")

from planted import first_planted  # noqa: E402 - tests/diagnose, on pytest's pythonpath

from trainspeed.integrations.transformers import TrainspeedCallback  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "frameworks" / "hf_trainer.py"


def _train(folder: Path, callbacks: list[Any]) -> tuple[torch.nn.Module, list[float]]:
    from watched_loops import hf_tiny_train  # tests/watch: on pytest's pythonpath

    return hf_tiny_train(str(folder), steps=10, callbacks=callbacks)


def test_the_callback_reports_the_run_and_leaves_its_losses_bit_for_bit(tmp_path: Path) -> None:
    plain, plain_losses = _train(tmp_path / "a", [])
    callback = TrainspeedCallback(json=tmp_path / "doctor.json", summary=False)
    watched, losses = _train(tmp_path / "b", [callback])
    assert losses == plain_losses and len(losses) == 10
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), watched.parameters()))
    data = json.loads((tmp_path / "doctor.json").read_text())
    assert data["steps"]["seen"] == 10 and data["batch_size"] == 8 and data["framework"]["name"] == "transformers"


@pytest.mark.planted
def test_the_callback_names_what_the_doctor_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "callback.json"
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), "--max-steps", "40", "--eval-steps", "2",
                                      "--trainspeed-json", str(out)])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    data = json.loads(out.read_text())
    assert (data["evaluation"]["in_run"], data["evaluation"]["every_steps"]) == (20, 2)
    first = first_planted(data, "evaluation_heavy")
    assert first["id"] == "evaluation_heavy"
    assert first["action"].startswith('TrainingArguments(eval_strategy="steps", eval_steps=8)')
