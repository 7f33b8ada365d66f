"""The doctor on examples/frameworks/, training scripts whose loop is a framework's (Lightning's Trainer, Hugging
Face's Trainer), run unchanged: the steps, evaluations and checkpoints the Trainer really makes against the report,
the planted bottleneck named first, and its action in the Trainer's own settings."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from planted import first_planted

from trainspeed.cli import main

FRAMEWORKS = Path(__file__).resolve().parents[1] / "examples" / "frameworks"

pytestmark = pytest.mark.planted


def _doctor(script: str, args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["doctor", "--json", "-", str(FRAMEWORKS / script), *args]) == 0
    out, _ = capsys.readouterr()
    return json.loads(out)  # type: ignore[no-any-return]


def _made_at(action: str) -> str:
    """The source line an action points at ("... (Trainer(...) at path:line)")."""
    found = re.search(r"\(\w+\(\.\.\.\) at (.+):(\d+)\)$", action)
    assert found is not None, action
    return Path(found.group(1)).read_text().splitlines()[int(found.group(2)) - 1]


@pytest.mark.filterwarnings("ignore")  # Lightning's own deprecation warnings about the torch it runs on
class TestLightning:
    steps, batch, per_epoch = 120, 64, math.ceil(1500 / 64)

    @pytest.fixture(autouse=True)
    def _needs_lightning(self) -> None:
        pytest.importorskip("lightning", reason="the lightning extra is not installed")

    def test_a_healthy_fit_is_counted_as_the_trainer_runs_it(self, capsys: pytest.CaptureFixture[str]) -> None:
        data = _doctor("lightning_trainer.py", [], capsys)
        assert data["framework"]["name"] == "lightning" and data["framework"]["version"]
        assert data["steps"]["seen"] == self.steps and data["batch_size"] == self.batch
        # one validation per epoch and the sanity check's before training
        assert data["evaluation"]["in_run"] == math.ceil(self.steps / self.per_epoch) + 1
        assert data["saves"]["count"] == 0

    def test_validating_every_two_steps_names_val_check_interval(self, capsys: pytest.CaptureFixture[str]) -> None:
        data = _doctor("lightning_trainer.py", ["--val-check-interval", "2"], capsys)
        assert (data["evaluation"]["in_run"], data["evaluation"]["every_steps"]) == (self.steps // 2 + 1, 2)
        # Lightning counts the interval within each epoch of 24 batches: 3 validations an epoch, said in the run's counts
        assert first_planted(data, "evaluation_heavy")["action"].startswith(
            f"Trainer(val_check_interval=8) validates {self.steps // 24 * 3} times in this run's {self.steps} steps "
            f"instead of {self.steps // 2 + 1}")
        train, val = sorted(data["loaders"], key=lambda ld: ld["evaluation_batches"])
        assert train["length"] == 24 and val["evaluation_batches"] == val["batches"] > 0 and not train["evaluation_batches"]

    def test_checkpointing_every_step_names_model_checkpoint(self, capsys: pytest.CaptureFixture[str]) -> None:
        data = _doctor("lightning_trainer.py", ["--every-n-train-steps", "1"], capsys)
        assert (data["saves"]["count"], data["saves"]["every_steps"]) == (self.steps, 1)
        action = first_planted(data, "checkpoint_heavy")["action"]
        assert action.startswith("ModelCheckpoint(every_n_train_steps=")
        assert "ModelCheckpoint(dirpath=out" in _made_at(action)

    def test_augmenting_in_the_loader_is_input_bound(self, capsys: pytest.CaptureFixture[str]) -> None:
        data = _doctor("lightning_trainer.py", ["--augment-in-loader"], capsys)
        action = first_planted(data, "input_bound")["action"]
        # workers where the machine has cores beside the CNN's compute; on 2 cores, whole batches at a time
        assert "on_after_batch_transfer" in action or "num_workers=" in action and "train_dataloader()" in action


class TestHuggingFace:
    steps, batch = 40, 16

    @pytest.fixture(autouse=True)
    def _needs_transformers(self) -> None:
        pytest.importorskip("transformers", reason="the transformers extra is not installed")
        pytest.importorskip("accelerate", reason="the transformers extra is not installed (Trainer needs accelerate)")

    def test_evaluating_every_two_steps_names_eval_steps(self, capsys: pytest.CaptureFixture[str]) -> None:
        data = _doctor("hf_trainer.py", ["--max-steps", str(self.steps), "--eval-steps", "2"], capsys)
        assert data["framework"]["name"] == "transformers"
        assert data["steps"]["seen"] == self.steps and data["batch_size"] == self.batch  # model(**batch) read too
        assert (data["evaluation"]["in_run"], data["evaluation"]["every_steps"]) == (self.steps // 2, 2)
        action = first_planted(data, "evaluation_heavy")["action"]
        assert action.startswith('TrainingArguments(eval_strategy="steps", eval_steps=8)')
        assert _made_at(action).lstrip().startswith("targs = hf.TrainingArguments(")  # the script's own line

    def test_saving_every_step_is_one_checkpoint_a_step(self, capsys: pytest.CaptureFixture[str]) -> None:
        data = _doctor("hf_trainer.py", ["--max-steps", str(self.steps), "--save-steps", "1"], capsys)
        # each checkpoint: the weights (safetensors), the optimizer, the scheduler, the RNG states, the arguments
        assert (data["saves"]["count"], data["saves"]["every_steps"]) == (self.steps, 1)
        assert data["saves"]["calls"] >= 4 * self.steps
        assert first_planted(data, "checkpoint_heavy")["action"].startswith("TrainingArguments(save_steps=")

    def test_tokenizing_in_getitem_is_input_bound(self, capsys: pytest.CaptureFixture[str]) -> None:
        data = _doctor("hf_trainer.py", ["--max-steps", str(self.steps), "--tokenize-in-loader"], capsys)
        assert "dataset.map(tokenize, batched=True)" in first_planted(data, "input_bound")["action"]

    def test_activation_checkpointing_is_recompute_heavy(self, capsys: pytest.CaptureFixture[str]) -> None:
        data = _doctor("hf_trainer.py", ["--max-steps", str(self.steps), "--activation-checkpointing"], capsys)
        # each block's forward runs again inside backward: time of backward's, not a second forward
        assert data["steps"]["seen"] == self.steps and data["per_step"]["micro_batches"] == 1
        assert data["per_step"]["recompute_ms"] > 0.1 * data["steps"]["median_ms"]
        assert data["phases"]["backward"]["host_ms"] > data["per_step"]["recompute_ms"]
        action = first_planted(data, "recompute_heavy")["action"]
        assert re.match(r"TrainingArguments\((activation|gradient)_checkpointing=False\)", action)


class TestOtherLoops:
    """accelerate, Ignite and skorch: their steps, accumulation and evaluations as the scripts make them."""

    def test_an_accelerate_loop_with_accumulation(self, capsys: pytest.CaptureFixture[str]) -> None:
        pytest.importorskip("accelerate", reason="the accelerate extra is not installed")
        data = _doctor("accelerate_loop.py", ["--epochs", "3", "--gradient-accumulation-steps", "4"], capsys)
        per_epoch = math.ceil(math.ceil(1500 / 32) / 4)  # accelerate steps at each 4th batch and the epoch's last
        assert data["framework"]["name"] == "accelerate"
        assert data["steps"]["seen"] == 3 * per_epoch and data["per_step"]["micro_batches"] == 4
        assert data["batch_size"] == 32
        assert (data["evaluation"]["in_run"], data["evaluation"]["every_steps"]) == (3, per_epoch)

    def test_an_ignite_engine_with_an_evaluator_every_ten_iterations(self, capsys: pytest.CaptureFixture[str]) -> None:
        pytest.importorskip("ignite", reason="the ignite extra is not installed")
        data = _doctor("ignite_engine.py", ["--epochs", "3", "--eval-every", "10"], capsys)
        steps = 3 * math.ceil(1500 / 32)
        assert data["framework"]["name"] == "ignite" and data["steps"]["seen"] == steps
        assert (data["evaluation"]["in_run"], data["evaluation"]["every_steps"]) == (steps // 10, 10)

    def test_a_skorch_fit_with_its_validation_split(self, capsys: pytest.CaptureFixture[str]) -> None:
        pytest.importorskip("skorch", reason="the skorch extra is not installed")
        data = _doctor("skorch_net.py", ["--max-epochs", "3"], capsys)
        per_epoch = math.ceil(int(1797 * 0.8) / 32)  # skorch holds out a fifth of the data for validation
        assert data["framework"]["name"] == "skorch" and data["steps"]["seen"] == 3 * per_epoch
        assert (data["evaluation"]["in_run"], data["evaluation"]["every_steps"]) == (3, per_epoch)
