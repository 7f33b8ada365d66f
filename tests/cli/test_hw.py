"""`trainspeed hw`: JSON keys of the contract, human view, no crash without a GPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from trainspeed.cli import main

CPU_KEYS = {"model", "vendor", "microarchitecture", "microarchitecture_source", "physical_cores",
            "logical_threads", "features", "ram_total_bytes", "ram_available_bytes", "torch_threads"}
GPU_KEYS = {"index", "name", "product", "architecture", "compute_capability", "vram_total_bytes",
            "vram_free_bytes", "sm_count", "peak_tflops", "memory_bandwidth_gbs", "pcie", "driver", "cuda"}


def test_hw_json_to_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hw.json"
    assert main(["hw", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "trainspeed.hw/1"
    assert CPU_KEYS <= set(data["cpu"])
    assert data["cpu"]["microarchitecture_source"] in ("model name", "cpuid", "isa flags", "isa flags, not cpuid", None)
    assert isinstance(data["gpus"], list)
    for g in data["gpus"]:
        assert GPU_KEYS <= set(g)
        assert set(g["peak_tflops"]) == {"fp32", "tf32", "bf16"}
        assert set(g["pcie"]) == {"generation", "width"}
    assert "CPU" in capsys.readouterr().out


def test_hw_json_stdout_is_pure_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hw", "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["schema"] == "trainspeed.hw/1"
    assert "CPU" in captured.err  # the human view moved to stderr


def test_hw_without_cuda_or_nvml(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert main(["hw", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gpus"] == [] and data["cuda_available"] is False and "No CUDA GPU" in data["note"]


def test_hw_json_into_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hw", "--json", str(tmp_path / "nope" / "hw.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err


def test_hw_json_where_the_folder_cannot_be_written_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # a read-only file system (root may write any folder; the write itself fails there): no traceback
    import os
    import tempfile

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(30, os.strerror(30))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    assert main(["hw", "--json", str(tmp_path / "hw.json")]) == 2
    err = capsys.readouterr().err
    assert err == f"trainspeed: error: cannot write {tmp_path / 'hw.json'}: Read-only file system\n"
    assert list(tmp_path.iterdir()) == []
