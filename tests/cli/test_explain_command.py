"""`trainspeed explain ID [DIR]`: a kept report's verdict with all its evidence; bad input in one line, status 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainspeed.cli import main

EVIDENCE = ("saving checkpoints took 12.00 ms of a 20.00 ms step (60% of the run's time) (69 checkpoints in the run, "
            "every step)")


def _report(path: Path, verdicts: list[dict[str, object]], **more: object) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "doctor.json").write_text(json.dumps({
        "schema": "trainspeed.doctor/1", "script": "train.py", "when": "2026-12-01 10:00",
        "steps": {"measured": 64, "median_ms": 20.0}, "verdicts": verdicts,
        "probe": {"cpu_dispatch_us": 1.8123456, "threads_step_ms": None}, "notes": [], **more}))
    return path / "doctor.json"


SAVES = {"id": "checkpoint_heavy", "title": "Saving a checkpoint every step", "evidence": EVIDENCE,
         "action": "save every 12 steps, or hand the state_dict copy to a background thread",
         "predicted_speedup": 2.14, "predicted_process_speedup": 1.61, "lever": None, "site": "train.py:40",
         "brief": "saving checkpoints takes 60% of the run", "fix": "if step % 12 == 0: torch.save(...)",
         "unpredicted": None}


def test_a_verdict_is_explained_with_all_it_rests_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _report(tmp_path / "runs" / "doctor-1", [SAVES], others_cpu_cores=1.02, threads_wait_ms=8.5, steal_share=0.016)
    assert main(["explain", "checkpoint_heavy", str(tmp_path / "runs" / "doctor-1")]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the paragraphs as one line, whatever the width
    assert out.startswith("checkpoint_heavy: Saving a checkpoint every step")
    assert EVIDENCE in out and "save every 12 steps, or hand the state_dict copy" in out
    assert "predicted 2.14x on the training loop, 1.61x on the whole script" in out
    assert "fix at train.py:40: if step % 12 == 0: torch.save(...)" in out
    assert "other processes kept 1.02 CPUs busy" in out and "steal time: 1.6%" in out
    assert "cpu_dispatch_us 1.812" in out and "threads_step_ms" not in out  # the probes that ran


def test_the_newest_report_under_the_folder_is_the_default(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    old = _report(tmp_path / "runs" / "doctor-1", [SAVES])
    new = _report(tmp_path / "runs" / "doctor-2", [{**SAVES, "title": "Saving checkpoints too often"}])
    os.utime(old, (1_000_000, 1_000_000))
    monkeypatch.chdir(tmp_path)
    assert main(["explain", "checkpoint_heavy"]) == 0
    assert "Saving checkpoints too often" in capsys.readouterr().out and new.exists()
    assert main(["explain", "checkpoint_heavy", str(old)]) == 0  # a doctor.json named itself
    assert "Saving a checkpoint every step" in capsys.readouterr().out


def test_what_try_measured_and_why_nothing_is_predicted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    memory = {**SAVES, "id": "memory_pressure", "title": "Memory nearly full", "predicted_speedup": None,
              "predicted_process_speedup": None, "unpredicted": "memory is a limit, not a cost"}
    tried = {"rounds": 3, "levers": [{"verdict": "checkpoint_heavy", "measured_speedup": 1.9, "interval": [1.7, 2.1],
                                      "failed": None, "losses": {"text": "the same 64 losses, bit for bit"}}]}
    _report(tmp_path, [SAVES, memory], tried=tried)
    assert main(["explain", "memory_pressure", str(tmp_path)]) == 0
    assert "no prediction: memory is a limit, not a cost" in capsys.readouterr().out
    assert main(["explain", "checkpoint_heavy", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--try measured 1.90x [1.70, 2.10] (95%) over 3 rounds; losses: the same 64 losses, bit for bit" in out


@pytest.mark.parametrize(("verdict", "where", "message"), [
    ("input_bound", "{report}", "no verdict 'input_bound' in this report (its verdicts: checkpoint_heavy)"),
    ("checkpoint_heavy", "{missing}", "no such file or folder"),
    ("checkpoint_heavy", "{empty}", "no doctor report in this folder or below it"),
    ("checkpoint_heavy", "{other}", "not a doctor report"),
    ("checkpoint_heavy", "{broken}", "not JSON"),
])
def test_bad_input_is_one_line_and_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], verdict: str,
                                            where: str, message: str) -> None:
    report = _report(tmp_path / "run", [SAVES])
    (tmp_path / "empty").mkdir()
    (tmp_path / "other.json").write_text(json.dumps({"schema": "trainspeed.sweep/1"}))
    (tmp_path / "broken.json").write_text("{")
    paths = {"report": report, "missing": tmp_path / "nope", "empty": tmp_path / "empty",
             "other": tmp_path / "other.json", "broken": tmp_path / "broken.json"}
    assert main(["explain", verdict, where.format(**{k: str(v) for k, v in paths.items()})]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err



def test_json_holds_the_verdict_and_what_it_was_judged_with(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _report(tmp_path, [SAVES], others_cpu_cores=1.02)
    out = tmp_path / "explained.json"
    assert main(["explain", "checkpoint_heavy", str(tmp_path), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "trainspeed.explain/1" and data["rank"] == 1 and data["verdict"] == SAVES
    assert data["load"]["others_cpu_cores"] == 1.02 and data["probe"]["cpu_dispatch_us"] == 1.8123456
    assert "Saving a checkpoint every step" in capsys.readouterr().out  # the view as well, stdout being free
    assert main(["explain", "checkpoint_heavy", str(tmp_path), "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["tried"] == []
