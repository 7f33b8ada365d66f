"""checkpoint_heavy and evaluation_heavy on recorded measurements: GPU runs judged without a GPU."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import CTX, ids, recorded

from trainspeed.diagnose.rules import diagnose
from trainspeed.watch.result import Evaluation


def test_a_checkpoint_every_hundred_steps_is_judged_by_its_share() -> None:
    r = recorded(10.0, {"forward": 3.0, "backward": 4.0, "optimizer": 1.0}, flops=1e10,
                 shares={"checkpoint": 0.3, "forward": 0.21, "backward": 0.28, "optimizer": 0.07})
    v = diagnose(r, CTX)[0]
    assert v.id == "checkpoint_heavy" and "in bursts" in v.evidence
    assert v.action.startswith("save 30 times less often")
    assert v.predicted_speedup == pytest.approx(1 / (1 - 0.3 * (1 - 1 / 30)), abs=0.01)


def test_evaluation_heavy_from_a_large_share_of_the_run_in_evaluation() -> None:
    # examples/eval_too_often.py (2026-11-23, CPU): 19 evaluations of 142.5 ms, one every 50 steps, 43% of the run
    r = recorded(3.76, {"forward": 1.3, "backward": 1.6, "optimizer": 0.27}, flops=2.7e8, batch=512, threads=2)
    heavy = dataclasses.replace(r, evaluation=Evaluation(count=19, mean_ms=142.5, share=0.43, every_steps=50.0))
    verdict = diagnose(heavy, CTX)[0]
    assert verdict.id == "evaluation_heavy"
    assert "43%" in verdict.evidence and "one every 50 steps" in verdict.evidence
    assert "every 200 steps" in verdict.action and "inference_mode" in verdict.action
    assert verdict.predicted_speedup == pytest.approx(1 / (1 - 0.43 * 3 / 4), abs=0.01)
    # one evaluation a tenth of the run: not worth a verdict
    light = dataclasses.replace(r, evaluation=Evaluation(count=1, mean_ms=40.0, share=0.1, every_steps=None))
    assert "evaluation_heavy" not in ids(light)
