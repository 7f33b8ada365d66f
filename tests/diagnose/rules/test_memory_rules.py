"""recompute_heavy on recorded measurements."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import CTX, ids, recorded

from trainspeed.diagnose.rules import diagnose
from trainspeed.watch.frameworks import Framework
from trainspeed.watch.result import WatchResult


def _checkpointed(recompute_ms: float) -> WatchResult:
    """examples/frameworks/hf_trainer.py --activation-checkpointing as the doctor recorded it (2026-11-26, CPU): a
    2-block GPT-2 whose blocks Hugging Face runs under torch.utils.checkpoint; module calls inside backward 21.3 ms."""
    r = recorded(81.68, {"forward": 24.0, "backward": 55.0, "optimizer": 0.9}, ops=900, flops=1.2e10, batch=16,
                 threads=2, peak=int(0.57 * 2**30), capacity=int(23.5 * 2**30))
    return dataclasses.replace(r, recompute_ms_per_step=recompute_ms)


def test_recompute_inside_backward_for_a_tenth_of_the_step_is_named_with_its_floor() -> None:
    verdict = next(v for v in diagnose(_checkpointed(21.32), CTX) if v.id == "recompute_heavy")
    assert "module calls there took 21.32 ms of the 81.68 ms step (26%" in verdict.evidence
    assert "0.57 GiB of 23.5 GiB RAM (2%)" in verdict.evidence and "a floor" in verdict.evidence
    assert "torch.utils.checkpoint.checkpoint" in verdict.action and "gradient accumulation" in verdict.action
    assert verdict.predicted_speedup == pytest.approx(81.68 / (81.68 - 21.32), abs=0.01)
    assert "recompute_heavy" not in ids(_checkpointed(7.0), CTX)  # under a tenth of the step
    assert "recompute_heavy" not in ids(_checkpointed(0.0), CTX)


def test_inside_hugging_faces_trainer_the_action_names_its_setting_by_release() -> None:
    for version, setting in (("5.24.0", "activation_checkpointing"), ("4.46.3", "gradient_checkpointing")):
        r = dataclasses.replace(_checkpointed(21.32), framework=Framework("transformers", version))
        verdict = next(v for v in diagnose(r, CTX) if v.id == "recompute_heavy")
        assert verdict.action.startswith(f"TrainingArguments({setting}=False) where memory allows")
