"""A run inside PyTorch Lightning's Trainer, watched unchanged: its steps, its batch size, its validations, the
closure Lightning's automatic optimisation hands the optimizer, and the same weights as unwatched."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from watched_loops import hf_tiny_train

from trainspeed.load.view import others_busy
from trainspeed.watch import Watcher

L = pytest.importorskip("lightning", reason="Lightning is not installed (pip install -e .[dev] installs it)")


class _Net(L.LightningModule):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x), y))

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


class _Validations(L.Callback):  # type: ignore[misc,name-defined]
    """What the Trainer really ran: its own count of validation passes (the sanity check's included)."""

    def __init__(self) -> None:
        self.count = 0

    def on_validation_start(self, trainer, module) -> None:  # type: ignore[no-untyped-def]
        self.count += 1


def _fit(watcher: Watcher | None = None) -> tuple[_Net, int]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x, y = torch.tensor(digits.data, dtype=torch.float32) / 16, torch.tensor(digits.target)
    torch.manual_seed(0)
    model, seen = _Net(), _Validations()
    trainer = L.Trainer(max_steps=40, val_check_interval=10, limit_val_batches=2, accelerator="cpu", devices=1,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[seen])
    train = DataLoader(TensorDataset(x[:1500], y[:1500]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[1500:], y[1500:]), batch_size=256)
    if watcher is None:
        trainer.fit(model, train, val)
    else:
        with watcher:
            trainer.fit(model, train, val)
    return model, seen.count


@pytest.mark.filterwarnings("ignore")
def test_a_lightning_fit_is_counted_as_it_runs_and_trains_the_same_weights() -> None:
    plain, _ = _fit()
    w = Watcher(warmup=2, profile_steps=0)
    watched, validations = _fit(w)
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), watched.parameters()))  # bit for bit
    r = w.measurements()
    assert r.steps.seen == 40 and r.model.batch_size == 32  # not the validation's 256 of the sanity check before training
    # Lightning restores the training flag by hand (no model.train()): each validation still ends, at the next batch
    assert r.evaluation is not None and r.evaluation.in_run == validations >= 4
    # the closure (training_step, backward, Lightning's hooks) is not the optimizer's: AdamW's update of 5 kB of
    # parameters is a small part of the step, where the closure's work was 80% of the optimizer phase
    assert r.phases["forward"].host_ms > 0 and r.phases["backward"].host_ms > 0
    if others_busy(r):  # the shares then are the load's as much as the script's
        pytest.skip(f"other processes kept {r.load.others_cpu_cores if r.load else 0.0:.1f} cores busy: the optimizer's and Lightning's "
                    "shares of the step are theirs too (beside two busy processes 15% and 11% once, alone 17% and 58%)")
    assert r.phases["optimizer"].share < r.phases["other"].share



@pytest.mark.filterwarnings("ignore")
def test_a_hugging_face_trainer_run_is_counted_as_it_runs_and_trains_the_same_weights(tmp_path: Any) -> None:
    pytest.importorskip("transformers", reason="the transformers extra is not installed")
    pytest.importorskip("accelerate", reason="the transformers extra is not installed (Trainer needs accelerate)")
    plain, plain_losses = hf_tiny_train(str(tmp_path / "a"), steps=12, accumulation=2)
    w = Watcher(warmup=2, profile_steps=0)
    watched, losses = hf_tiny_train(str(tmp_path / "b"), steps=12, accumulation=2, watcher=w)
    assert losses == plain_losses and len(losses) == 12  # bit for bit
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), watched.parameters()))
    r = w.measurements()
    # optimizer steps, each of two micro-batches of 8 given as model(**batch)
    assert r.steps.seen == 12 and r.model.batch_size == 8 and r.steps.micro_batches_per_step == 2
    assert r.framework is not None and r.framework.name == "transformers"
