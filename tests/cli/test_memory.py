"""`trainspeed memory`: JSON keys, measuring, the batch search, and bad input."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch

from trainspeed.cli import main

BYTES_KEYS = {"params", "grads", "optimizer", "activations", "transient", "total"}


def _json(capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    return json.loads(capsys.readouterr().out)


def test_builtin_with_measure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "gpt", "--batch-size", "4", "--optimizer", "adam", "--measure", "--json", "-"]) == 0
    data = _json(capsys)
    assert data["schema"] == "trainspeed.memory/1"
    assert BYTES_KEYS <= set(data["bytes"])
    assert sum(v for k, v in data["bytes"].items() if k != "total") == data["bytes"]["total"]
    assert data["batch_size"] == 4 and data["max_batch"] is None
    assert data["measured"]["device"] == "cpu" and abs(data["error_pct"]) < 1
    assert data["per_sample_bytes"] > 0 and data["fixed_bytes"] > 0
    assert any(row["name"] == "head" for row in data["layers"])


def test_budget_search(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "iris-mlp", "--batch-size", "8", "--optimizer", "sgd", "--budget", "1MiB", "--json", "-"]) == 0
    data = _json(capsys)
    usable = 0.9 * 2**20
    assert data["max_batch"] > 8 and data["search"]["predicted_bytes"] <= usable


def test_budget_search_confirmed_by_measurement(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "iris-mlp", "--optimizer", "sgd", "--budget", "256KiB", "--measure", "--json", "-"]) == 0
    data = _json(capsys)
    assert data["search"]["confirmed"] is True
    assert len(data["search"]["trials"]) <= 4


def test_file_factory_and_input_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "mymodel.py"
    f.write_text(textwrap.dedent("""
        import torch.nn as nn
        def build():
            return nn.Sequential(nn.Embedding(100, 16), nn.Flatten(), nn.Linear(16 * 10, 2))
        def not_a_model():
            return 3
    """))
    argv = ["memory", f"{f}:build", "--input-shape", "10", "--input-dtype", "int64", "--input-high", "100",
            "--batch-size", "2", "--json", "-"]
    assert main(argv) == 0
    assert _json(capsys)["input_dtype"] == "int64"
    assert main(["memory", f"{f}:not_a_model", "--input-shape", "10"]) == 2
    assert "not an nn.Module" in capsys.readouterr().err


def test_module_factory_spec(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "trainspeed.workloads.zoo:DigitsCNN", "--input-shape", "1,8,8", "--json", "-"]) == 0
    assert _json(capsys)["param_count"] > 0


def test_meta_failure_falls_back_to_measuring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "datadep.py"
    f.write_text(textwrap.dedent("""
        import torch, torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return self.fc(x) * float(x.abs().max())
    """))
    assert main(["memory", f"{f}:M", "--input-shape", "4", "--batch-size", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "add --measure" in err and "aten." in err
    assert main(["memory", f"{f}:M", "--input-shape", "4", "--batch-size", "2", "--measure", "--json", "-"]) == 0
    data = _json(capsys)
    assert data["bytes"] is None and data["measured"]["peak_bytes"] > 0
    assert any("measured on the real device instead" in note for note in data["notes"])


@pytest.mark.parametrize(("argv", "message"), [
    (["memory", "nope.py:f", "--input-shape", "4"], "no such file"),
    (["memory", "os.path:nonexistent_factory", "--input-shape", "4"], "has no 'nonexistent_factory'"),
    (["memory", "no_such_module_xyz:f", "--input-shape", "4"], "cannot import module"),
    (["memory", "mystery"], "unknown model"),
    (["memory", "iris-mlp", "--input-shape", "3,x"], "--input-shape"),
    (["memory", "iris-mlp", "--input-shape", "0"], "--input-shape"),
    (["memory", "iris-mlp", "--batch-size", "0"], "positive integer"),
    (["memory", "iris-mlp", "--batch-size", "-3"], "positive integer"),
    (["memory", "iris-mlp", "--optimizer", "lion"], "invalid choice"),
    (["memory", "iris-mlp", "--budget", "24XB"], "not a size"),
    (["memory", "iris-mlp", "--budget", "-1GiB"], "a size must be positive"),  # once read as a flag
    (["memory", "iris-mlp", "--budget=-1GiB"], "a size must be positive"),
    (["memory", "iris-mlp", "--budget", "1e-3"], "at least one byte"),
    (["memory", "iris-mlp", "--batch-size", "100000000000000"], "at most 2147483647"),
    # torch's fake-tensor logger once printed the meta kernel's traceback first: one line now
    (["memory", "iris-mlp", "--input-shape", "3,32,32"], "forward does not accept input of shape (N, 3, 32, 32)"),
    (["memory", "iris-mlp", "--margin", "1.5"], "--margin"),
    (["memory", "trainspeed.workloads.zoo:DigitsCNN"], "--input-shape is needed"),
    (["memory", "iris-mlp", "--input-shape", "4", "--input-dtype", "int64"], "--input-high"),
    (["memory", "gpt", "--world-size", "4"], "--world-size 4 needs --shard"),
    (["memory", "gpt", "--world-size", "0", "--shard", "fsdp"], "positive integer"),
    (["memory", "gpt", "--world-size", "2", "--shard", "fsdp2"], "invalid choice"),
    (["memory", "gpt", "--world-size", "2", "--shard", "fsdp", "--measure"], "measured on its ranks under torchrun"),
    (["memory", "gpt", "--world-size", "2", "--shard", "ddp", "--budget", "100KiB"],
     "smaller than one rank's share of the parameters (535.0 KiB)"),
    (["memory", "gpt", "--gpu", "h100-80gb", "--budget", "1GiB"], "--gpu h100-80gb is the budget and the device"),
    (["memory", "gpt", "--gpu", "h999"], "invalid choice"),
    (["memory", "gpt", "--world-size", "2", "--shard", "zero1", "--fsdp-param-dtype", "bf16"],
     "it needs --shard fsdp or fsdp-no-reshard"),
    (["memory", "gpt", "--world-size", "2", "--shard", "ddp", "--cpu-offload"],
     "--cpu-offload is FSDP2's CPUOffloadPolicy: it needs --shard fsdp or fsdp-no-reshard"),
    (["memory", "nope/config.json"], "no such file"),
])
def test_bad_input(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_cuda_device_without_cuda(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["memory", "iris-mlp", "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err
    assert main(["memory", "iris-mlp", "--device", "cuda", "--budget", "16GiB", "--json", "-"]) == 0
    data = _json(capsys)
    assert data["bytes"]["total"] % 512 == 0 and data["max_batch"] > 0


def test_one_rank_of_a_sharded_world(capsys: pytest.CaptureFixture[str]) -> None:
    """`--world-size 4 --shard fsdp`: one rank's peak, its shards and the all-gathered parameters it holds, and the
    largest per-rank batch; the fake process group is gone after."""
    import torch.distributed as dist

    assert main(["memory", "gpt", "--batch-size", "8", "--world-size", "4", "--shard", "fsdp", "--budget", "20MiB",
                 "--loss", "mean", "--json", "-"]) == 0  # the peak in backward, where a unit's parameters are gathered
    data = _json(capsys)
    assert (data["world_size"], data["shard"]) == (4, "fsdp") and not dist.is_initialized()
    whole = 136_960 * 4  # gpt's parameters in fp32 (the head tied to the embedding)
    assert data["bytes"]["params"] == whole // 4 and data["bytes"]["optimizer"] >= 2 * whole // 4
    assert data["bytes"]["unsharded"] > 0 and data["bytes"]["communication"] == 0
    assert sum(v for k, v in data["bytes"].items() if k != "total") == data["bytes"]["total"]
    assert data["max_batch"] > 8 and data["search"]["predicted_bytes"] <= 0.9 * 20 * 2**20
    assert main(["memory", "gpt", "--batch-size", "8", "--world-size", "4", "--shard", "ddp"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # as one line, however the terminal wrapped it
    assert "Peak of one rank's steady-state training step (the busiest of 4, ddp; batch 8 per rank)" in out
    assert f"communication {whole / 1024:.1f} KiB" in out and "gradient buckets are added by size" in out
    assert main(["memory", "gpt", "--batch-size", "8", "--world-size", "4", "--shard", "fsdp", "--cpu-offload",
                 "--json", "-"]) == 0
    data = _json(capsys)
    assert data["cpu_offload"] and data["host_bytes"] >= 3 * whole // 4  # the shards and Adam's two moments
    assert data["bytes"]["params"] == data["bytes"]["optimizer"] == data["bytes"]["grads"] == 0
    assert main(["memory", "gpt", "--batch-size", "8", "--world-size", "4", "--shard", "fsdp", "--cpu-offload"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "fsdp, CPU offload: the device's peak" in out and "in host memory (CPU offload):" in out


def test_a_gpu_is_the_budget_and_the_device(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["memory", "gpt", "--batch-size", "8", "--gpu", "l4", "--json", "-"]) == 0
    data = _json(capsys)
    assert data["device"] == "cuda" and data["search"]["budget_bytes"] == 24 * 2**30
    assert data["bytes"]["total"] % 512 == 0 and data["max_batch"] > 8
    assert any("the budget is the memory of one l4: 24 GiB" in note for note in data["notes"])


def test_the_loss_is_the_users_and_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A language model trained with cross-entropy keeps its log-softmax for backward: the estimate on the mean of
    the output missed it (10% under the measured step); on the loss given, the estimate is the measured step's."""
    peaks = {}
    for loss in ("mean", "cross-entropy"):
        assert main(["memory", "gpt", "--batch-size", "8", "--loss", loss, "--measure", "--json", "-"]) == 0
        data = _json(capsys)
        assert data["notes"][0] == f"loss: {loss} (--loss)"
        assert abs(data["bytes"]["total"] - data["measured"]["peak_bytes"]) <= 0.02 * data["measured"]["peak_bytes"]
        peaks[loss] = data["measured"]["peak_bytes"]
    assert peaks["cross-entropy"] > peaks["mean"]
    assert main(["memory", "gpt", "--batch-size", "8", "--json", "-"]) == 0
    assert _json(capsys)["notes"][0].startswith("loss: cross-entropy, chosen from the output's shape")
    own = tmp_path / "losses.py"
    own.write_text("def first_logit(output):\n    return output[..., 0].sum()\n")
    assert main(["memory", "gpt", "--batch-size", "8", "--loss", f"{own}:first_logit", "--json", "-"]) == 0
    assert _json(capsys)["notes"][0] == f"loss: {own}:first_logit (--loss)"
    assert main(["memory", "gpt", "--loss", "hinge"]) == 2
    assert "--loss: give one of cross-entropy, mse, mean" in capsys.readouterr().err
