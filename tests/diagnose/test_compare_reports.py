"""Two doctor reports compared on recorded samples: a real slowdown is told from noise."""

from __future__ import annotations

import numpy as np
import pytest

from trainspeed.diagnose.compare import CompareError, change, compare


def _report(step_ms: float, spread: float = 0.03, seed: int = 0, verdicts: tuple[str, ...] = ("launch_bound",),
            n: int = 256) -> dict:  # type: ignore[type-arg]
    """A doctor.json shaped object whose step sample is `step_ms` with a relative spread, the forward phase a
    third of it, data nothing."""
    rng = np.random.default_rng(seed)
    steps = (step_ms * (1 + spread * rng.standard_normal(n))).tolist()
    forward = [s / 3 for s in steps]
    return {
        "schema": "trainspeed.doctor/1", "script": "train.py", "device": "cpu",
        "steps": {"median_ms": float(np.median(steps))},
        "phases": {"forward": {"host_ms": float(np.median(forward))}, "data": {"host_ms": 0.0}},
        "verdicts": [{"id": v, "predicted_speedup": 1.5} for v in verdicts],
        "samples": {"step_ms": steps, "phase_ms": {"forward": forward, "data": [0.0] * n}},
    }


def test_the_same_run_twice_is_no_real_difference() -> None:
    c = compare(_report(10.0, seed=1), _report(10.0, seed=2))
    assert c.conclusion == "no real difference" and c.step.low < 0 < c.step.high  # type: ignore[operator]
    assert not c.slower_than(5) and not c.slower_than(0)


def test_a_ten_percent_slowdown_is_slower_with_its_interval() -> None:
    c = compare(_report(10.0, seed=1), _report(11.0, seed=2))
    assert c.conclusion == "slower" and c.step.change == pytest.approx(0.10, abs=0.01)
    assert 0.05 < c.step.low < 0.10 < c.step.high < 0.15  # type: ignore[operator]
    assert c.slower_than(5) and not c.slower_than(15)
    assert "10." in c.line and "slower per step" in c.line
    forward = next(p for p in c.phases if p.what == "forward")
    assert forward.real and forward.delta_ms == pytest.approx(1.0 / 3, abs=0.05)
    data = next(p for p in c.phases if p.what == "data")
    assert not data.real and data.change is None  # nothing in both: no relative change to speak of


def test_a_change_inside_the_run_to_run_noise_is_no_real_difference() -> None:
    a, b = _report(10.0, spread=0.01, seed=1), _report(10.25, spread=0.01, seed=2)
    c = compare(a, b)
    assert c.step.low > 0 and c.conclusion == "no real difference"  # type: ignore[operator]
    assert "run-to-run noise of +/-5%" in c.line
    assert compare(a, b, noise=0.01).conclusion == "slower"


def test_a_faster_run_is_faster() -> None:
    c = compare(_report(10.0, seed=1), _report(8.0, seed=2))
    assert c.conclusion == "faster" and c.step.high < 0 and not c.slower_than(0)  # type: ignore[operator]


def test_verdicts_that_appeared_or_went_away() -> None:
    c = compare(_report(10.0, verdicts=("launch_bound", "logging_heavy")), _report(10.0, verdicts=("launch_bound",
                                                                                                   "input_bound")))
    status = {v.id: v.status for v in c.verdicts}
    assert status == {"input_bound": "appeared", "logging_heavy": "went away", "launch_bound": "in both"}


def test_reports_without_samples_are_compared_by_their_medians_without_an_interval() -> None:
    a, b = _report(10.0), _report(12.0, seed=3)
    del a["samples"]
    c = compare(a, b)
    assert c.step.low is None and c.step.change == pytest.approx(0.2, abs=0.02) and not c.slower_than(5)
    assert c.conclusion == "no real difference" and "no interval" in c.line and "A holds no step sample" in c.notes[0]


def test_what_is_not_a_doctor_report_is_refused_in_one_line() -> None:
    with pytest.raises(CompareError, match="B: not a trainspeed report"):
        compare(_report(10.0), {"steps": {}}, "A", "B")
    with pytest.raises(CompareError, match="a trainspeed.hw/1 report, not a doctor report"):
        compare({"schema": "trainspeed.hw/1"}, _report(10.0))
    newer = dict(_report(10.0), schema="trainspeed.doctor/2")
    with pytest.raises(CompareError, match="different schema versions: A is trainspeed.doctor/1, B is trainspeed.doctor/2"):
        compare(_report(10.0), newer)


def test_the_interval_is_the_same_for_the_same_samples() -> None:
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 5.0]
    assert change("step", a, b) == change("step", a, b)


def _runs(step_ms: float, offsets: list[float], seed: int) -> list[dict]:  # type: ignore[type-arg]
    """Several runs of one script whose machine ran each at its own speed (`offsets`, shares of the step)."""
    return [_report(step_ms * (1 + o), spread=0.01, seed=seed + i) for i, o in enumerate(offsets)]


def test_several_runs_a_side_put_their_spread_in_the_interval() -> None:
    a, same = _runs(10.0, [0.0, 0.06, -0.04], 1), _runs(10.0, [0.05, -0.03, 0.0], 11)
    pair = compare(a[1], same[1])  # one run a side: this pair differs by 8.5%, tightly, beyond the band
    assert pair.step.high < -0.05 and pair.conclusion == "faster"  # type: ignore[operator]
    c = compare(a, same)
    assert c.noise == 0 and c.step.low < 0 < c.step.high and c.conclusion == "no real difference"  # type: ignore[operator]
    assert c.step.a_ms == pytest.approx(10.0 * (1 + 0.02 / 3), rel=0.01)  # the mean of the runs' medians
    slow = compare(a, _runs(11.0, [0.01, -0.01, 0.0], 21))
    assert slow.conclusion == "slower" and 0.0 < slow.step.low < 0.10 < slow.step.high  # type: ignore[operator]
    assert any("3 runs of A and 3 of B" in n for n in slow.notes)
