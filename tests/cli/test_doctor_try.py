"""`trainspeed doctor --try`: the tried table on a real script, its arguments' checks, and Ctrl-C during a tried
run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trainspeed.cli import _glued, main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("argv", [
    ["--try", "0"], ["--try", "-1"], ["--try", "1.5"], ["--try", "2", "--rounds", "0"], ["--rounds", "2"],
])
def test_a_bad_count_is_one_line_and_status_2(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('never run')\n")
    assert main(["doctor", *argv, str(script)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("trainspeed: error: ") and "never run" not in err


def test_the_count_may_be_left_out_before_the_script() -> None:
    assert _glued(["doctor", "--try", "train.py", "--try", "3"]) == ["doctor", "--try=2", "train.py", "--try", "3"]
    assert _glued(["doctor", "--try", "3", "train.py"]) == ["doctor", "--try", "3", "train.py"]
    assert _glued(["doctor", "--steps", "5", "--", "train.py", "--try"]) == ["doctor", "--steps", "5", "--", "train.py",
                                                                          "--try"]


def _with_ctrl_c() -> None:
    """In the child before it starts: SIGINT as a terminal's foreground job has it. A shell starts a background job
    (`make test &`) with SIGINT ignored, its children inherit that, and Python then never raises KeyboardInterrupt:
    the doctor would wait for a tried run that never ends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _trainspeed(*argv: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "trainspeed", *argv], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_with_ctrl_c)


def test_the_tried_table_on_a_planted_example(tmp_path: Path) -> None:
    out = tmp_path / "doctor.json"
    run = _trainspeed("doctor", "--try", "--rounds", "2", "--steps", "30", "--json", str(out), "--",
                      str(EXAMPLES / "too_many_threads.py"), "--steps", "100", cwd=tmp_path)
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr[-3000:]
    assert "Tried (2 rounds of alternated runs, 30 steps each" in stdout
    data = json.loads(out.read_text())
    row = data["tried"]["levers"][0]
    assert row["verdict"] == data["verdicts"][0]["id"] == "thread_oversubscription"
    assert row["kind"] == "threads" and row["applied_as"].startswith("torch.set_num_threads(")
    assert row["failed"] is None and len(row["plain_s"]) == len(row["lever_s"]) == 2
    low, high = row["interval"]
    assert low <= row["measured_speedup"] <= high
    assert row["losses"]["compared"] == 30 and row["losses"]["plain_repeat"] is True
    assert data["verdicts"][0]["lever"]["settings"] == row["settings"]


SLOW_AFTER_FIRST = """
    import pathlib, time, torch
    first = not pathlib.Path("diagnosed").exists()
    pathlib.Path("diagnosed").touch()
    torch.set_num_threads(16)  # a lever to try: more threads than this machine's cores
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(40 if first else 10**9):
        if not first:
            time.sleep(0.05)  # the tried runs: long
        loss = model(torch.randn(4, 8)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_ctrl_c_during_a_tried_run_stops_promptly_and_keeps_the_diagnosis(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SLOW_AFTER_FIRST))
    out = tmp_path / "doctor.json"
    run = _trainspeed("doctor", "--try", "1", "--json", str(out), "--out", str(tmp_path / "runs"), "--", str(script),
                      cwd=tmp_path)
    deadline = time.monotonic() + 300
    while not list((tmp_path / "runs").glob("*/tried/plain/output-1.txt")):
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1][-3000:]
        time.sleep(0.2)
    time.sleep(2.0)  # the tried run is under way
    os.kill(run.pid, signal.SIGINT)
    stopped = time.monotonic()
    stdout, stderr = run.communicate(timeout=60)
    assert time.monotonic() - stopped < 30
    assert run.returncode == 130, stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["tried"]["interrupted"] is True and data["verdicts"]
    assert "interrupted (Ctrl-C)" in stdout
