"""`trainspeed compare` on files and folders: the gate's exit status, JSON, and bad input in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from trainspeed.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _write(path: Path, step_ms: float, seed: int) -> Path:
    steps = (step_ms * (1 + 0.03 * np.random.default_rng(seed).standard_normal(256))).tolist()
    path.write_text(json.dumps({"schema": "trainspeed.doctor/1", "steps": {"median_ms": float(np.median(steps))},
                                "phases": {}, "verdicts": [], "samples": {"step_ms": steps, "phase_ms": {}}}))
    return path


def test_the_gate_fails_a_real_slowdown_and_passes_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a.json", 10.0, 1)
    same = _write(tmp_path / "same.json", 10.0, 2)
    slow = _write(tmp_path / "slow.json", 11.0, 3)
    assert main(["compare", str(a), str(same), "--fail-if-slower", "5"]) == 0
    assert "no real difference" in capsys.readouterr().out
    assert main(["compare", str(a), str(slow), "--fail-if-slower", "5"]) == 1
    assert "slower per step" in capsys.readouterr().out
    assert main(["compare", str(a), str(slow), "--fail-if-slower", "20%"]) == 0  # not 20% slower with confidence
    capsys.readouterr()
    assert main(["compare", "--json", "-", str(a), str(slow)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "trainspeed.compare/1" and data["conclusion"] == "slower"
    assert {"a_ms", "b_ms", "change", "low", "high", "delta_ms"} <= set(data["step"])


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file or folder"),
    ("{not json", "not JSON"),
    ("[1, 2]", "not a trainspeed report"),
    ('{"schema": "trainspeed.hw/1"}', "not a doctor report"),
    ('{"schema": "trainspeed.doctor/2", "steps": {}}', "different schema versions"),
    ('{"schema": "trainspeed.doctor/1"}', "no measured step"),  # once read as "ran None on None", exit 0
    ('{"schema": "trainspeed.doctor/1", "steps": {"median_ms": 5}}', "without 'phases', 'verdicts'"),  # once exit 0
])
def test_bad_input_is_one_line_and_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None,
                                           message: str) -> None:
    a = _write(tmp_path / "a.json", 10.0, 1)
    b = tmp_path / "b.json"
    if content is not None:
        b.write_text(content)
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("flag", ["--fail-if-slower", "--noise"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN%"])
def test_a_threshold_that_could_never_judge_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str,
                                                       value: str) -> None:
    a = _write(tmp_path / "a.json", 10.0, 1)
    assert main(["compare", str(a), str(a), f"{flag}={value}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "expected a finite percentage" in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_the_sides_are_named_by_label_or_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    a = _write(tmp_path / "before" / "doctor.json", 10.0, 1)
    b = _write(tmp_path / "after" / "doctor.json", 11.0, 3)
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("after is ") and "than before" in out
    assert "A = before:" in out and str(a) in out.replace("\n", "")  # a long path may wrap
    assert main(["compare", str(a), str(b), "--label", "A=main", "--label", "b=pr-42", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["a"], data["b"], data["a_label"], data["b_label"]) == (str(a), str(b), "main", "pr-42")
    assert main(["compare", str(a), str(b), "--label", "C=x"]) == 2
    assert "expected A=NAME or B=NAME" in capsys.readouterr().err
    # doctor --try's runs: the same file name in each arm's folder
    (tmp_path / "tried" / "plain").mkdir(parents=True)
    (tmp_path / "tried" / "1-input_bound").mkdir()
    plain = _write(tmp_path / "tried" / "plain" / "doctor-1.json", 10.0, 1)
    lever = _write(tmp_path / "tried" / "1-input_bound" / "doctor-1.json", 5.0, 3)
    assert main(["compare", str(plain), str(lever), "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["a_label"], data["b_label"]) == ("plain/doctor-1.json", "1-input_bound/doctor-1.json")


def test_the_gate_needs_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _write(tmp_path / "a.json", 10.0, 1)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": "trainspeed.doctor/1", "steps": {"median_ms": 10.0}, "phases": {},
                               "verdicts": []}))
    assert main(["compare", str(a), str(old), "--fail-if-slower", "5"]) == 2
    assert "needs both runs' step samples" in capsys.readouterr().err


def test_doctor_runs_written_by_out_compare_one_or_several_a_side(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", sys.argv[:1])
    for name in ("before", "before", "after", "after"):
        assert main(["doctor", "--out", str(tmp_path / name), str(EXAMPLES / "seed_iris.py"), "--epochs", "300"]) == 0
    capsys.readouterr()
    one_a, one_b = (next((tmp_path / side).glob("doctor-*")) for side in ("before", "after"))
    assert main(["compare", "--json", "-", str(one_a), str(one_b)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["conclusion"] in ("faster", "slower", "no real difference") and data["noise"] == 0.05
    assert data["step"]["low"] is not None and set(data["phases"]) >= {"forward", "backward", "optimizer", "other"}
    assert main(["compare", "--json", "-", str(tmp_path / "before"), str(tmp_path / "after")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["noise"] == 0 and any("2 runs of" in n and "2 of" in n for n in data["notes"])
    broken = tmp_path / "after" / "doctor-broken"
    broken.mkdir()
    (broken / "doctor.json").write_text("{}")
    assert main(["compare", str(tmp_path / "before"), str(tmp_path / "after")]) == 2
    assert "not a trainspeed report" in capsys.readouterr().err
