"""On a CUDA machine: fit and the doctor under torchrun with NCCL (one rank per GPU), proving the path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def _torchrun(*args: str) -> subprocess.CompletedProcess[str]:
    n = str(min(torch.cuda.device_count(), 2))
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", n, *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_fit_under_torchrun_uses_nccl(tmp_path: Path) -> None:
    out = tmp_path / "fit.json"
    job = ROOT / "tests" / "distributed" / "ddp_job.py"
    done = _torchrun(str(job), "fit", str(out), "32", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    r = json.loads(out.read_text())
    assert r["strategy"].startswith("cuda:ddp") and any("(nccl, DDP)" in line for line in r["explain"])
    assert r["losses"][-1] < r["losses"][0]


def test_doctor_under_torchrun_times_the_nccl_all_reduce(tmp_path: Path) -> None:
    report = tmp_path / "doctor.json"
    done = _torchrun("-m", "trainspeed", "doctor", "--json", str(report), "examples/ddp_train.py", "--epochs", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    d = json.loads(report.read_text())["distributed"]
    assert d["backend"] == "nccl" and d["grad_bytes"] > 0
