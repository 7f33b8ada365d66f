"""`trainspeed demo`: outputs, JSON keys, never overwriting, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from planted import first_planted

from trainspeed.cli import main

RUN_KEYS = {"device", "variant", "seconds", "us_per_epoch", "syncs", "final_loss", "test_accuracy"}


@pytest.mark.planted
def test_demo_writes_json_plots_and_logs(tmp_path: Path) -> None:
    # in a process of its own: the demo's CPU rows at another thread count resize torch's thread pool, and beside busy
    # processes a pool shrunk and grown again left the next in-process run's parallel ops waiting far longer for a
    # core (examples/log_every_step.py's forward: 35 ms instead of 0.3; its planted verdict then missed)
    out = tmp_path / "results"
    captured = subprocess.run([sys.executable, "-m", "trainspeed", "demo", "--epochs", "100", "--devices", "cpu",
                               "--out", str(out), "--json", "-"], capture_output=True, text=True, timeout=900)
    assert captured.returncode == 0, captured.stderr
    data = json.loads(captured.stdout)
    assert data["schema"] == "trainspeed.demo/1"
    assert [r["variant"] for r in data["runs"]] == ["seed", "record_every_200", "no_record", "sync_free", "fit"]
    assert all(RUN_KEYS <= set(r) for r in data["runs"])
    assert isinstance(data["explanation"], str) and data["explanation"]
    assert data["hardware"]["schema"] == "trainspeed.hw/1"
    (folder,) = out.iterdir()
    names = {p.name for p in folder.iterdir()}
    assert {"demo.json", "loss_curves.png", "timing.png", "train-log-cpu-seed.txt"} <= names
    assert (folder / "loss_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((folder / "demo.json").read_text())["runs"] == data["runs"]
    assert "What the numbers say" in captured.stderr
    assert "cpu seed: 100 epochs in " in captured.stderr  # not on a terminal: a line per finished variant
    # the closing section, last: beside busy processes it may skip, saying so, after every check above has run
    first_planted(data["doctor"]["cpu"], "launch_bound")  # the seed's loop is launch-bound (a load verdict aside)


def test_demo_never_overwrites_an_old_run(tmp_path: Path) -> None:
    for _ in range(2):
        assert main(["demo", "--epochs", "20", "--devices", "cpu", "--out", str(tmp_path)]) == 0
    folders = sorted(p.name for p in tmp_path.iterdir())
    assert len(folders) == 2 and folders[0] != folders[1]


@pytest.mark.parametrize(("argv", "message"), [
    (["nonsense"], "invalid choice"),
    ([], "missing command"),
    (["demo", "--epochs", "0"], "positive integer"),
    (["demo", "--epochs", "abc"], "positive integer"),
    (["demo", "--epochs", "-5"], "positive integer"),
    (["demo", "--epochs", "100000000000000000000"], "at most 2147483647"),  # once a traceback
    (["demo", "--devices", "tpu"], "unknown device 'tpu'"),
    (["demo", "--devices", ","], "--devices is empty"),
    (["demo", "--bogus"], "unrecognized arguments"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_cuda_requested_without_cuda(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["demo", "--devices", "cpu,cuda"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CUDA is not available" in err


def test_out_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "taken"
    f.write_text("the user's file")
    assert main(["demo", "--epochs", "5", "--out", str(f)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert f.read_text() == "the user's file"


def test_json_path_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--epochs", "5", "--json", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_python_dash_m_entry_point_reports_usage_errors_plainly() -> None:
    proc = subprocess.run([sys.executable, "-m", "trainspeed", "demo", "--epochs", "abc"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr


@pytest.mark.parametrize("launcher", ["module", "console_script"])
def test_the_demo_blames_no_frame_of_its_launcher(launcher: str, tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "trainspeed"
    if launcher == "console_script" and not script.exists():
        pytest.skip("no console script beside this Python (not an installed venv)")
    head = [sys.executable, "-m", "trainspeed"] if launcher == "module" else [str(script)]
    done = subprocess.run([*head, "demo", "--epochs", "300", "--devices", "cpu", "--out", str(tmp_path), "--json", "-"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    verdicts = json.loads(done.stdout)["doctor"]["cpu"]["verdicts"]
    for v in verdicts:
        assert v["site"] is None and v["id"] != "host_code_heavy", v
