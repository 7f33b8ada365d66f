"""tryout/levers.py: each kind of lever applied in a process of its own before a small script runs, as `doctor
--try`'s runs apply them; the script's own settings are what the lever replaces."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from trainspeed.diagnose.rules.memory import MALLOC_KEEPS
from trainspeed.diagnose.verdict import Lever
from trainspeed.tryout.levers import environment

RUN = """
import json, runpy, sys
from trainspeed.diagnose.verdict import Lever
from trainspeed.tryout.levers import apply
spec = json.loads(sys.argv[1])
if spec:
    apply(Lever(**spec))
runpy.run_path(sys.argv[2], run_name="__main__")
"""


def _run(tmp_path: Path, script: str, lever: Lever | None) -> Any:
    """The JSON the script prints last, run with the lever applied first (or none)."""
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    spec = json.dumps(dataclasses.asdict(lever) if lever is not None else None)
    env = {**os.environ, **(environment(lever) if lever is not None else {})}
    done = subprocess.run([sys.executable, "-c", RUN, spec, str(path)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_threads_are_kept_whatever_the_script_sets(tmp_path: Path) -> None:
    script = """
        import json, os, torch
        torch.set_num_threads(8)
        print(json.dumps([torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")]))
    """
    assert _run(tmp_path, script, None)[0] == 8
    assert _run(tmp_path, script, Lever("threads", {"threads": 1}, "torch.set_num_threads(1)", False)) == [1, "1"]


def test_the_allocator_lever_is_the_environment_glibc_reads_at_start() -> None:
    assert environment(MALLOC_KEEPS) == {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "4294967296"}


LOADERS = """
    import json, torch
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(40, 3), torch.arange(40))
    train = DataLoader(data, 8, True)  # batch_size and shuffle given by position
    val = DataLoader(data, batch_size=20)
    g = torch.Generator().manual_seed(1)
    batches = [y.tolist() for _, y in DataLoader(data, batch_size=8, shuffle=True, generator=g)]
    print(json.dumps({"train": [train.num_workers, train.persistent_workers, train.batch_size],
                      "val": [val.num_workers, val.persistent_workers], "batches": batches}))
"""


def test_a_dataloader_lever_sets_the_matching_loaders_arguments_only(tmp_path: Path) -> None:
    lever = Lever("dataloader", {"num_workers": 2, "persistent_workers": True}, "DataLoader(..., num_workers=2)", True,
                  match={"dataset": "TensorDataset", "batch_size": 8})
    seen = _run(tmp_path, LOADERS, lever)
    assert seen["train"] == [2, True, 8] and seen["val"] == [0, False]
    assert seen["batches"] == _run(tmp_path, LOADERS, None)["batches"]  # the same batches, from the workers


def test_batches_taken_whole_are_the_same_batches_in_the_same_order(tmp_path: Path) -> None:
    lever = Lever("dataloader", {"batched": True}, "DataLoader(dataset, batch_size=None, ...)", True,
                  match={"dataset": "TensorDataset", "batch_size": 8})
    plain, whole = _run(tmp_path, LOADERS, None), _run(tmp_path, LOADERS, lever)
    assert whole["batches"] == plain["batches"] and len(plain["batches"]) == 5
    assert whole["train"][2] is None  # taken whole: the sampler hands out the batch's indices


def test_the_optimizer_lever_fuses_the_named_class(tmp_path: Path) -> None:
    script = """
        import json, torch
        p = [torch.nn.Parameter(torch.ones(3))]
        adamw, sgd = torch.optim.AdamW(p, lr=0.1, foreach=False), torch.optim.SGD(p, lr=0.1)
        print(json.dumps([adamw.defaults["fused"], adamw.defaults["foreach"], sgd.defaults.get("fused")]))
    """
    lever = Lever("optimizer", {"fused": True}, "torch.optim.AdamW(..., fused=True)", False, match={"kind": "AdamW"})
    assert _run(tmp_path, script, lever) == [True, None, None]


def test_a_lever_this_torch_cannot_take_says_why(tmp_path: Path) -> None:
    from trainspeed.tryout.levers import apply

    with pytest.raises(ValueError, match="LBFGS takes no fused=True"):
        apply(Lever("optimizer", {"fused": True}, "", False, match={"kind": "LBFGS"}))


def test_anomaly_detection_and_argument_checks_stay_off(tmp_path: Path) -> None:
    script = """
        import json, torch
        torch.autograd.set_detect_anomaly(True)
        on = torch.is_anomaly_enabled()
        with torch.autograd.detect_anomaly():
            inside = torch.is_anomaly_enabled()
        torch.distributions.Distribution.set_default_validate_args(True)
        normal = torch.distributions.Normal(torch.zeros(2), torch.ones(2), validate_args=True)
        print(json.dumps([on, inside, normal._validate_args]))
    """
    assert _run(tmp_path, script, None) == [True, True, True]
    assert _run(tmp_path, script, Lever("anomaly_off", {}, "", True))[:2] == [False, False]
    assert _run(tmp_path, script, Lever("validate_args_off", {}, "", True))[2] is False


def test_float32_matmul_precision_is_kept_whatever_the_script_sets(tmp_path: Path) -> None:
    script = """
        import json, torch
        torch.set_float32_matmul_precision("highest")
        print(json.dumps(torch.get_float32_matmul_precision()))
    """
    lever = Lever("matmul_precision", {"float32_matmul_precision": "high"}, "", False)
    assert _run(tmp_path, script, None) == "highest"
    assert _run(tmp_path, script, lever) == "high"


def test_lightning_settings_are_given_to_the_trainer_and_its_checkpoint(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    script = """
        import json
        import lightning as L
        from lightning.pytorch.callbacks import ModelCheckpoint
        ckpt = ModelCheckpoint(dirpath=".", every_n_train_steps=1)
        trainer = L.Trainer(val_check_interval=2, enable_progress_bar=True, logger=False, callbacks=[ckpt],
                            enable_checkpointing=True)
        print(json.dumps([trainer.val_check_interval, trainer.progress_bar_callback is None,
                          ckpt._every_n_train_steps]))
    """
    lever = Lever("lightning", {"Trainer.val_check_interval": 8, "Trainer.enable_progress_bar": False,
                                "ModelCheckpoint.every_n_train_steps": 5, "ModelCheckpoint.every_n_epochs": None,
                                "ModelCheckpoint.train_time_interval": None}, "", True)
    assert _run(tmp_path, script, None) == [2, False, 1]
    assert _run(tmp_path, script, lever) == [8, True, 5]


def test_training_arguments_fields_are_set_before_their_checks(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    script = """
        import json
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir=".", eval_strategy="steps", eval_steps=2, logging_steps=1,
                                 report_to=[])
        print(json.dumps([args.eval_steps, args.logging_steps, args.logging_nan_inf_filter, str(args.save_strategy)]))
    """
    lever = Lever("transformers", {"eval_steps": 8, "logging_nan_inf_filter": False, "save_strategy": "no"}, "", True)
    plain, set_ = _run(tmp_path, script, None), _run(tmp_path, script, lever)
    assert plain[:3] == [2, 1, True]
    assert set_[:3] == [8, 1, False] and "no" in set_[3].lower()
