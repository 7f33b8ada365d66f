"""`trainspeed doctor --window A:B`: the report written while the script is still training, the script's own output
and exit status kept, its losses those of a plain run; a window the run never finished said so; bad input in one
line with status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainspeed.cli import main

SCRIPT = """
import os, sys
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 16), torch.randn(64, 1)
report = sys.argv[2] if len(sys.argv) > 2 else None
losses, seen_at = [], None
for step in range(int(sys.argv[1])):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
    if seen_at is None and report and os.path.exists(report):
        seen_at = step
print("losses", repr(sum(losses)), "report seen at step", seen_at)
sys.exit(3)
"""


def _run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainspeed", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_the_report_is_written_while_the_script_trains_on(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    report = tmp_path / "r.json"
    plain = subprocess.run([sys.executable, str(script), "300"], capture_output=True, text=True, timeout=600)
    done = _run("doctor", "--window", "40:120", "--json", str(report), "--", str(script), "300", str(report),
                cwd=tmp_path)
    assert done.returncode == 3, done.stderr  # the script's own status
    losses_plain = plain.stdout.split(" report")[0]
    assert done.stdout.startswith(losses_plain)  # the same losses, bit for bit (repr of their sum)
    seen_at = int(done.stdout.split("report seen at step ")[1])
    assert seen_at == 120  # the step after the window: the report came before it, while the script ran
    data = json.loads(report.read_text())
    assert data["window"] == {"asked": "40:120", "opened_at": 40, "closed_at": 120, "ended_at": None,
                              "held_s": data["window"]["held_s"]}
    assert data["window"]["held_s"] > 0 and data["exit_code"] is None and data["steps"]["seen"] == 80
    assert "Watched steps 40 to 120 of a run that went on; the report held it" in done.stderr
    assert "Not seen in the window: evaluations or saves less often than every 80 steps." in done.stderr


def test_a_window_past_the_runs_end_is_said(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = _run("doctor", "--window", "100:400", "--json", "r.json", "--", str(script), "150", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "The run ended at step 150, inside the window 100:400 (steps 100 to 150 here)." in done.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["window"]["ended_at"] == 150 and data["window"]["closed_at"] is None and data["exit_code"] == 3


@pytest.mark.parametrize("argv, said", [
    (["--window", "50:40"], "--window 50:40: the first step must come before the last"),
    (["--window", "-3:40"], "--window -3:40: steps and seconds count from 0: no negative value"),
    (["--window", "10:100", "--steps", "50"], "--window and --steps do not go together"),
    (["--window", "10:100", "--try"], "--try runs the script again; with --window the report comes while"),
])
def test_a_window_that_cannot_be_is_refused_in_one_line(argv: list[str], said: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('the script must not run')\n")
    assert main(["doctor", *argv, str(script)]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1


def test_under_torchrun_a_window_is_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('the script must not run')\n")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["doctor", "--window", "60s", str(script)]) == 2
    assert "under torchrun a window is steps (A:B)" in capsys.readouterr().err


INTERIM = """
import json, os, sys
import torch

torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(300):
    optimizer.zero_grad()
    model(torch.randn(32, 16)).pow(2).mean().backward()
    optimizer.step()
    if step in (130, 250) and os.path.exists(sys.argv[1]):
        data = json.load(open(sys.argv[1]))
        print("at", step, "the report has", data["steps"]["seen"], data["exit_code"], flush=True)
"""


def test_report_every_rewrites_the_report_while_the_run_goes_on(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(INTERIM)
    report = tmp_path / "r.json"
    done = _run("doctor", "--report-every", "100", "--json", str(report), "--", str(script), str(report), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "at 130 the report has 100 None" in done.stdout and "at 250 the report has 200 None" in done.stdout
    data = json.loads(report.read_text())  # the run's end: the full report over the interim ones
    assert data["steps"]["seen"] == 300 and data["exit_code"] == 0
    assert not any("an interim report" in note for note in data["notes"])


@pytest.mark.parametrize("argv, said", [
    (["--report-every", "50"], "--report-every rewrites the report's files: give --json PATH, --html PATH or --out"),
    (["--report-every", "50", "--json", "-"], "--report-every rewrites the report's files"),
    (["--report-every", "50", "--json", "r.json", "--window", "10:100"], "--report-every and --window do not go"),
    (["--report-every", "0", "--json", "r.json"], "--report-every"),
])
def test_report_every_needs_files_and_no_window(argv: list[str], said: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('the script must not run')\n")
    assert main(["doctor", *argv, str(script)]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
