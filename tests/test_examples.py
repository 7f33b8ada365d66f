"""The examples run as plain scripts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_seed_iris_runs_on_cpu() -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLES / "seed_iris.py"), "--epochs", "200", "--device", "cpu"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Epoch [200/200], Loss:" in proc.stdout and "Training time:" in proc.stdout


def test_the_dataloader_fed_cnn_runs_on_cpu_with_workers() -> None:
    args = ["--images", "256", "--batch-size", "64", "--epochs", "1", "--workers", "1", "--device", "cpu"]
    proc = subprocess.run([sys.executable, str(EXAMPLES / "cnn_dataloader.py"), *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "done: 4 steps, last loss" in proc.stdout
