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
    heavy = dataclasses.replace(r, evaluation=Evaluation(count=19, mean_ms=142.5, share=0.43,
                                                                          every_steps=50.0, in_run=20), steps=dataclasses.replace(r.steps, seen=1000))
    verdict = diagnose(heavy, CTX)[0]
    assert verdict.id == "evaluation_heavy"
    assert "43% of the measured run's time: 20 evaluations in the run, one every 50 steps (19 during the measured " \
        "steps), 142.5 ms each" in verdict.evidence
    # the interval's effect in the run's own counts: 5 of its 20 evaluations left
    assert "every 200 steps (5 evaluations in this run's 1000 steps instead of 20)" in verdict.action
    assert "inference_mode" in verdict.action
    assert verdict.predicted_speedup == pytest.approx(1 / (1 - 0.43 * (1 - 5 / 20)), abs=0.01)
    # a run of 120 steps evaluating every 10: an interval of 40 leaves 3 of its 12, a quarter; of 130 steps, 3 of 13
    short = dataclasses.replace(heavy, evaluation=dataclasses.replace(heavy.evaluation, every_steps=10.0,
                                                                                       in_run=13, count=12), steps=dataclasses.replace(heavy.steps, seen=130))
    v = diagnose(short, CTX)[0]
    assert "every 40 steps (3 evaluations in this run's 130 steps instead of 13)" in v.action
    assert v.predicted_speedup == pytest.approx(1 / (1 - 0.43 * (1 - 3 / 13)), abs=0.01)
    # one evaluation a tenth of the run: not worth a verdict
    light = dataclasses.replace(r, evaluation=Evaluation(count=1, mean_ms=40.0, share=0.1, every_steps=None))
    assert "evaluation_heavy" not in ids(light)


def test_a_step_verdicts_prediction_is_the_runs_with_its_evaluations_held() -> None:
    # char_gpt-like (2026-11-25, CPU): a training step of overhead-bound ops, and evaluations taking half the run.
    # launch_bound's 2x on the step is 1 / (0.5 + 0.5 / 2) = 1.33x on the run, which is what a user measures, and
    # what evaluation_heavy's prediction (of the run) is ranked against
    from trainspeed.diagnose.rules.step_model import speedup, step_speedup

    r = recorded(1.0, {"forward": 0.4, "backward": 0.4, "optimizer": 0.1}, ops=300, flops=1e5)  # 300 tiny ops
    assert step_speedup(r, 10.0, 5.0) == speedup(10.0, 5.0) == 2.0  # no evaluation: the step's is the run's
    half = dataclasses.replace(r, evaluation=Evaluation(count=9, mean_ms=100.0, share=0.5, every_steps=10.0, in_run=10))
    assert step_speedup(half, 10.0, 5.0) == pytest.approx(1 / (0.5 + 0.5 / 2), abs=0.005)
    alone = {v.id: v.predicted_speedup for v in diagnose(r, CTX)}
    held = {v.id: v.predicted_speedup for v in diagnose(half, CTX)}
    assert alone["launch_bound"] == 1.43 and held["launch_bound"] == pytest.approx(1 / (0.5 + 0.5 / 1.43), abs=0.01)
    assert diagnose(half, CTX)[0].id == "evaluation_heavy"  # 1.6x on the run, against the step's held to 1.18x
    # an epoch's preprocessing in bursts: the mean step 1.25 times the median, a fifth of the run held
    bursts = dataclasses.replace(r, steps=dataclasses.replace(r.steps, mean_ms=1.25))
    held = {v.id: v.predicted_speedup for v in diagnose(bursts, CTX)}
    assert held["launch_bound"] == pytest.approx(1.25 / (1.25 - 1.0 + 1.0 / 1.43), abs=0.01)
