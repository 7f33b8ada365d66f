"""compile_heavy on recorded measurements."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import CTX, ids, recorded

from trainspeed.diagnose.rules import diagnose
from trainspeed.watch.result import Compiles, WatchResult


def _recompiled(seconds: float) -> WatchResult:
    """An MLP under torch.compile on digits as the doctor recorded it (2026-11-26, CPU): 102 measured steps of 1.12 ms
    by median, 2.60 ms by mean, one recompile for the last batch of the first epoch (97 rows instead of 100)."""
    r = recorded(1.124, {"forward": 0.28, "backward": 0.38, "optimizer": 0.4}, ops=75, flops=2e7, batch=100, threads=2)
    return dataclasses.replace(r, steps=dataclasses.replace(r.steps, measured=102, mean_ms=2.6),
                               window=dataclasses.replace(r.window, compiled=True), machine=dataclasses.replace(r.machine, compiles=Compiles(1, seconds)))


def test_a_recompile_inside_the_measured_steps_is_named_with_its_share_of_the_run() -> None:
    verdict = diagnose(_recompiled(0.145), CTX)[0]
    assert verdict.id == "compile_heavy"
    assert "compiled 1 graph while the steps were measured, after the first steps: 0.14 s of the measured run's " \
           "0.27 s (55%" in verdict.evidence and "a floor" in verdict.evidence
    assert "drop_last=True" in verdict.action and "dynamic=True" in verdict.action
    assert verdict.predicted_speedup == pytest.approx(1 / (1 - 0.145 / 0.2652), abs=0.01)
    assert "compile_heavy" not in ids(_recompiled(0.02), CTX)  # under a tenth of the run
    run = _recompiled(0.145)
    assert "compile_heavy" not in ids(dataclasses.replace(run, machine=dataclasses.replace(run.machine, compiles=None)), CTX)


def test_inside_hugging_faces_trainer_the_action_names_its_settings() -> None:
    from trainspeed.watch.frameworks import Framework

    r = dataclasses.replace(_recompiled(0.145), framework=Framework("transformers", "5.24.0"))
    verdict = diagnose(r, CTX)[0]
    assert verdict.id == "compile_heavy"
    assert verdict.action.startswith("TrainingArguments(dataloader_drop_last=True) keeps every training batch one shape")
    assert "pad_to_multiple_of" in verdict.action
