"""dropout_heavy on recorded measurements."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import CTX, ids, recorded

from trainspeed.diagnose.rules import diagnose
from trainspeed.watch.result import OpTime, WatchResult


def _classifier(mask_ms: float = 7.9, dev: str = "cpu") -> WatchResult:
    """A small transformer classifier on a CPU (scratch, 2026-11-26): eight dropouts in a 23 ms step."""
    r = recorded(23.0, {"data": 0.2, "forward": 14.0, "backward": 6.5, "optimizer": 1.5}, ops=810, flops=0.71e9,
                 batch=32, threads=2, dev=dev)
    rows = [OpTime("aten.bernoulli_", "float32", 8, mask_ms, False, None),
            OpTime("aten.mm", "float32", 20, 3.4, True, 0.47e9), OpTime("aten.bmm", "float32", 12, 1.8, True, 0.11e9)]
    return dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows, op_ms_per_step=21.7))


def test_masks_drawn_for_a_third_of_a_cpu_step_are_named_first() -> None:
    v = diagnose(_classifier(), CTX)[0]
    assert v.id == "dropout_heavy"
    assert "random masks take 7.90 ms of the 23.00 ms step (34%; aten.bernoulli_ x8 per step" in v.evidence
    assert "dropout=0" in v.action and "validation loss" in v.action
    assert v.predicted_speedup == pytest.approx(23.0 / (23.0 - 7.9), abs=0.01)


def test_masks_under_a_tenth_of_the_step_or_on_a_gpu_are_left_alone() -> None:
    assert "dropout_heavy" not in ids(_classifier(mask_ms=2.0))
    assert "dropout_heavy" not in ids(_classifier(dev="cuda"))
    # the window ran slower than the step: its times are taken down to the step's room first
    slow = _classifier(mask_ms=7.9)
    slow = dataclasses.replace(slow, window=dataclasses.replace(slow.window,
                                                                op_ms_per_step=100.0))  # 7.9 ms x 22.8 / 100
    assert "dropout_heavy" not in ids(slow)


def test_a_dropout_run_as_one_op_counts_once() -> None:
    r = _classifier()
    rows = [dataclasses.replace(r.window.op_times[0], op="aten.native_dropout", ms=8.4), *r.window.op_times]
    v = diagnose(dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows)), CTX)[0]
    assert v.id == "dropout_heavy" and "take 7.90 ms" in v.evidence  # the draws inside it, not both
    alone = [row for row in rows if row.op != "aten.bernoulli_"]
    v = diagnose(dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=alone)), CTX)[0]
    assert v.id == "dropout_heavy" and "take 8.40 ms" in v.evidence and "aten.native_dropout x8" in v.evidence
