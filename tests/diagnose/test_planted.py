"""The planted-verdict check the example tests share (planted.py): what it holds alone, loaded, and under `--busy`."""

from __future__ import annotations

from typing import Any

import planted
import pytest


def _report(ids: list[str], others: float) -> dict[str, Any]:
    """A doctor JSON report's parts the check reads: verdicts in order, the other processes' cores, phases, steps."""
    verdicts = [{"id": i, "evidence": "other processes kept 1.9 cores busy" if i == "thread_oversubscription"
                 else "the script's", "predicted_speedup": 1.5} for i in ids]
    return {"verdicts": verdicts, "others_cpu_cores": others,
            "phases": {"forward": {"share": 0.6, "host_ms": 3.0, "wait_ms": 1.0},
                       "data": {"share": 0.4, "host_ms": 2.0, "wait_ms": None}},
            "steps": {"median_ms": 5.3, "mean_ms": 27.3}}


def test_the_planted_verdict_first_beside_a_load_verdict_about_other_processes_passes() -> None:
    data = _report(["thread_oversubscription", "launch_bound", "input_bound"], others=1.9)
    assert planted.first_planted(data, "launch_bound")["id"] == "launch_bound"


def test_a_loaded_run_that_named_another_first_skips_unless_busy_mode_holds_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = _report(["input_bound", "launch_bound"], others=1.9)
    monkeypatch.setattr(planted, "BUSY", 0)
    with pytest.raises(pytest.skip.Exception, match="1.9 cores busy"):
        planted.first_planted(data, "launch_bound")
    monkeypatch.setattr(planted, "BUSY", 2)
    with pytest.raises(planted.PlantedMiss) as miss:  # the one failure `--busy` measures again (conftest.py)
        planted.first_planted(data, "launch_bound")
    assert "launch_bound not first: ['input_bound', 'launch_bound']" in str(miss.value)
    assert "median step 5.3 ms, mean 27.3 ms" in str(miss.value) and "forward 60% 3.00 ms (waited 1.00)" in str(miss.value)


def test_a_quiet_run_that_named_another_first_fails_as_an_assertion(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planted, "BUSY", 0)
    with pytest.raises(AssertionError, match="launch_bound not first"):
        planted.first_planted(_report(["input_bound", "launch_bound"], others=0.01), "launch_bound")
    with pytest.raises(AssertionError, match="the fused layer's prediction"):
        planted.planted_detail(_report(["launch_bound"], others=0.01), False, "the fused layer's prediction")


def test_under_busy_mode_a_miss_the_load_verdict_explains_by_turns_on_one_core_skips(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose load verdict says its threads took turns on one core (the doctor's own caveat on the verdicts
    about the script) skips under `--busy`, saying so; the same miss without it is a PlantedMiss."""
    monkeypatch.setattr(planted, "BUSY", 2)
    data = _report(["thread_oversubscription", "optimizer_heavy", "checkpoint_heavy"], others=1.0)
    data["verdicts"][0]["evidence"] += "; in 87% of the samples ...: they took turns on one core (...)"
    data["threads_one_cpu_share"] = 0.87
    with pytest.raises(pytest.skip.Exception, match="took turns on one core \\(87% of the samples"):
        planted.first_planted(data, "checkpoint_heavy")
    with pytest.raises(pytest.skip.Exception, match="lacked the save's line"):
        planted.planted_detail(data, False, "the save's line")
    data["verdicts"][0]["evidence"] = "other processes kept 1.0 cores busy"
    with pytest.raises(planted.PlantedMiss):
        planted.first_planted(data, "checkpoint_heavy")
