"""Verdicts said in the framework's settings (diagnose/rules/frameworks.py), on recorded measurements: the same
evidence and prediction as in a plain loop, the action naming the Trainer's argument with the rule's figure."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import CTX, recorded

from trainspeed.diagnose.rules import diagnose
from trainspeed.watch.frameworks import Framework, unsupported_note
from trainspeed.watch.result import Evaluation, WatchResult
from trainspeed.watch.sites import FrameworkSite, SyncSite

HF = Framework("transformers", "5.24.0")
PL = Framework("lightning", "2.6.6")


def _evaluating(framework: Framework | None) -> WatchResult:
    r = recorded(3.76, {"forward": 1.3, "backward": 1.6, "optimizer": 0.27}, flops=2.7e8, batch=512, threads=2)
    return dataclasses.replace(r, framework=framework, evaluation=Evaluation(count=19, mean_ms=142.5, share=0.43,
                                                                             every_steps=5.0, in_run=20))


def _saving(framework: Framework | None) -> WatchResult:
    r = recorded(10.0, {"forward": 3.0, "backward": 4.0, "optimizer": 1.0, "checkpoint": 1.5}, flops=1e10)
    return dataclasses.replace(r, framework=framework, checkpoints=dataclasses.replace(r.checkpoints, saves=100,
                                                                                       calls=400, every_steps=1.0))


@pytest.mark.parametrize(("framework", "setting"), [
    (HF, 'TrainingArguments(eval_strategy="steps", eval_steps=20)'),
    (PL, "Trainer(val_check_interval=20)"),
])
def test_evaluating_too_often_names_the_trainers_interval(framework: Framework, setting: str) -> None:
    plain, inside = diagnose(_evaluating(None), CTX)[0], diagnose(_evaluating(framework), CTX)[0]
    assert inside.id == plain.id == "evaluation_heavy"
    assert (inside.evidence, inside.predicted_speedup) == (plain.evidence, plain.predicted_speedup)
    assert inside.action.startswith(setting) and "inference_mode" not in inside.action


@pytest.mark.parametrize(("framework", "setting"), [
    (HF, "TrainingArguments(save_steps=15) saves 6 times in this run's 100 steps instead of 100; save_only_model=True"),
    (PL, "ModelCheckpoint(every_n_train_steps=15) saves 6 times in this run's 100 steps instead of 100; "
         "save_weights_only=True"),
])
def test_saving_too_often_names_the_trainers_interval(framework: Framework, setting: str) -> None:
    v = diagnose(_saving(framework), CTX)[0]
    assert v.id == "checkpoint_heavy" and v.action.startswith(setting)
    assert "100 checkpoints of 400 torch.save calls in the run, every step" in v.evidence


def test_a_trainer_s_interval_is_said_in_the_run_s_own_counts() -> None:
    """Lightning counts val_check_interval within each epoch: validating every 4 of 24 batches an epoch (12
    validations in 48 steps), an interval of 16 leaves 2, not "4 times less often"; past the epoch's batches
    Lightning refuses the interval, and whole epochs are the lever. A Hugging Face run of 20 steps saving every
    step is told to save not at all, not every 35 steps."""
    from trainspeed.watch.result import LoaderInfo

    train = LoaderInfo(0, False, 32, False, batches=48, length=24)
    val = LoaderInfo(0, False, 64, False, batches=120, length=10)
    r = _evaluating(PL)
    r = dataclasses.replace(r, steps=dataclasses.replace(r.steps, seen=48),
                            loaders=dataclasses.replace(r.loaders, each=[train, dataclasses.replace(val, batches=12)]),
                            evaluation=Evaluation(count=11, mean_ms=142.5, share=0.43, every_steps=4.0, in_run=12))
    v = diagnose(r, CTX)[0]
    assert v.action.startswith("Trainer(val_check_interval=16) validates 2 times in this run's 48 steps instead of 12")
    often = dataclasses.replace(r, evaluation=dataclasses.replace(r.evaluation, every_steps=8.0, in_run=6, count=5))
    assert diagnose(often, CTX)[0].action.startswith(
        "Trainer(check_val_every_n_epoch=2) (val_check_interval may not pass the epoch's 24 batches) validates "
        "1 time in this run's 48 steps instead of 6")
    saving = recorded(10.0, {"forward": 3.0, "backward": 2.5, "optimizer": 1.0, "checkpoint": 3.5}, flops=1e10)
    short = dataclasses.replace(saving, framework=HF, steps=dataclasses.replace(saving.steps, seen=20),
                                checkpoints=dataclasses.replace(saving.checkpoints, saves=20, calls=20,
                                                                every_steps=1.0))
    assert diagnose(short, CTX)[0].action.startswith(
        "TrainingArguments(save_strategy=\"no\") saves nothing in this run's 20 steps (was 20)")


def test_a_starved_loader_inside_the_hf_trainer_names_its_dataloader_arguments() -> None:
    from trainspeed.diagnose.rules.frameworks import in_framework
    from trainspeed.diagnose.verdict import Verdict

    generic = Verdict("input_bound", "waiting", "DataLoader(..., num_workers=3, persistent_workers=True, "
                      "pin_memory=True); if that is not enough, make __getitem__ cheaper", 1.5)
    r = dataclasses.replace(recorded(10.0, {"data": 5.0}), framework=HF)
    (v,) = in_framework([generic], r)
    assert v.action.startswith("TrainingArguments(dataloader_num_workers=3, dataloader_persistent_workers=True, "
                               "dataloader_pin_memory=True); if that is not enough")


def test_a_healthy_run_names_the_frameworks_precision_setting() -> None:
    r = recorded(10.0, {"forward": 4.0, "backward": 5.0, "optimizer": 0.8}, flops=1e9)
    assert diagnose(r, CTX)[-1].action.startswith("healthy; the next levers are bf16 autocast")
    assert 'Trainer(precision="bf16-mixed")' in diagnose(dataclasses.replace(r, framework=PL), CTX)[-1].action
    assert "TrainingArguments(bf16=True)" in diagnose(dataclasses.replace(r, framework=HF), CTX)[-1].action


def test_the_frameworks_own_work_is_named_by_its_functions() -> None:
    from trainspeed.diagnose.rules.frameworks import in_framework
    from trainspeed.diagnose.verdict import Verdict

    sites = [FrameworkSite("lightning/pytorch/callbacks/progress/tqdm_progress.py:on_train_batch_end", 6, 0.6),
             FrameworkSite("lightning/pytorch/core/module.py:log", 2, 0.2)]
    r = recorded(10.0, {"forward": 4.0})
    r = dataclasses.replace(r, framework=PL, sites=dataclasses.replace(r.sites, framework=sites))
    (v,) = in_framework([Verdict("host_code_heavy", "30% of the step is outside", "vectorise", 1.4)], r)
    assert v.evidence.endswith("in lightning's own code: lightning/pytorch/callbacks/progress/tqdm_progress.py:"
                               "on_train_batch_end (60%), lightning/pytorch/core/module.py:log (20%) of those samples")
    assert v.action.startswith("Lightning's own work on every step") and "enable_progress_bar=False" in v.action
    # a loop of the script's own keeps its verdicts as they are
    plain = dataclasses.replace(r, framework=None)
    assert in_framework([Verdict("host_code_heavy", "e", "vectorise", 1.4)], plain)[0].action == "vectorise"


def test_a_setting_the_run_has_already_is_not_advised_again() -> None:
    """A Lightning script that turned its progress bar off was told Trainer(enable_progress_bar=False); one logging
    every 50 steps is not told log_every_n_steps=50. Read off the Trainer the run made (watch/made_at.py)."""
    from trainspeed.diagnose.rules.frameworks import in_framework
    from trainspeed.diagnose.verdict import Verdict

    sites = [FrameworkSite("lightning/pytorch/loops/training_epoch_loop.py:advance", 6, 0.6)]
    base = recorded(10.0, {"forward": 4.0})
    base = dataclasses.replace(base, sites=dataclasses.replace(base.sites, framework=sites))
    quiet = dataclasses.replace(PL, settings={"progress_bar": False, "log_every": 50})
    r = dataclasses.replace(base, framework=quiet)
    host, log = in_framework([Verdict("host_code_heavy", "e", "vectorise", 1.4), Verdict("logging_heavy", "e", "l", 1.2)],
                             r)
    assert "enable_progress_bar" not in host.action and "the progress bar is off already" in host.action
    assert "enable_progress_bar" not in log.action and "log_every_n_steps" not in log.action
    assert log.action.startswith("self.log(..., on_step=False, on_epoch=True)")
    loud = dataclasses.replace(base, framework=dataclasses.replace(PL, settings={"progress_bar": True, "log_every": 1}))
    _, told = in_framework([Verdict("host_code_heavy", "e", "v", 1.4), Verdict("logging_heavy", "e", "l", 1.2)], loud)
    assert told.action.startswith("Trainer(log_every_n_steps=50)") and "enable_progress_bar=False" in told.action
    hf = dataclasses.replace(base, framework=dataclasses.replace(HF, settings={"progress_bar": False, "log_every": 500}))
    (v,) = in_framework([Verdict("host_code_heavy", "e", "v", 1.4)], hf)
    assert "disable_tqdm" not in v.action and "logging_steps" not in v.action


def test_the_trainer_s_settings_are_read_off_the_one_the_script_made() -> None:
    lightning = pytest.importorskip("lightning")
    from trainspeed.watch.made_at import MadeAt

    made = MadeAt()
    made.install()
    try:
        lightning.Trainer(enable_progress_bar=False, log_every_n_steps=7, logger=False, enable_checkpointing=False,
                          enable_model_summary=False, accelerator="cpu")
        lightning.Trainer(enable_progress_bar=True, logger=False)  # a second one: the first is the run's
    finally:
        made.uninstall()
    assert made.settings == {"progress_bar": False, "log_every": 7}
    assert made.sites["Trainer"].startswith(__file__)


def test_a_framework_older_than_the_settings_named_is_said_once() -> None:
    assert unsupported_note(Framework("lightning", "1.9.5")) is not None
    assert unsupported_note(PL) is None and unsupported_note(Framework("transformers", None)) is None


def test_an_action_points_at_the_line_that_made_the_setting() -> None:
    made = {"TrainingArguments": "train.py:12"}
    v = diagnose(_evaluating(dataclasses.replace(HF, made_at=made)), CTX)[0]
    assert v.action.endswith(" (TrainingArguments(...) at train.py:12)")
    made = {"Trainer": "fit.py:30", "ModelCheckpoint": "fit.py:25"}
    v = diagnose(_saving(dataclasses.replace(PL, made_at=made)), CTX)[0]
    assert v.action.endswith(" (ModelCheckpoint(...) at fit.py:25)")
    assert diagnose(_saving(PL), CTX)[0].action.endswith("save_top_k bounds the files kept")  # no line noted


def _hf_on_h100(step_ms: float, host: dict[str, float], busy: float, syncs: float,
                reads: dict[str, int]) -> WatchResult:
    r = recorded(step_ms, host, {p: ms * 1.03 for p, ms in host.items() if p != "sync"}, dev="cuda", ops=345,
                 kernels=205, flops=3.2e10, syncs=syncs, batch=128, busy=busy)
    sites = [SyncSite("hf_trainer.py:96", op, n, 0.05 * n) for op, n in reads.items()]
    return dataclasses.replace(r, framework=HF, reads=dataclasses.replace(r.reads, sync_sites=sites))


def test_logging_every_step_inside_the_hf_trainer_on_a_gpu_is_not_named_where_the_reads_wait_on_nothing() -> None:
    """The H100 run of examples/frameworks/hf_trainer.py --logging-steps 1 (batch 128, 2026-11-26): 5 reads of
    device data a step (the NaN filter's 3 truth tests, the log's 2 .item()), 0.10 ms of a 7.87 ms step, the GPU
    busy 2.49 ms of it. The reads wait on nothing: the host's launches are the step, and no sync verdict is said."""
    r = _hf_on_h100(7.87, {"data": 0.42, "h2d": 0.06, "forward": 2.09, "backward": 2.94, "optimizer": 0.31,
                           "sync": 0.10}, busy=2.49, syncs=5.0, reads={"__bool__": 282, "item": 188})
    found = [v.id for v in diagnose(r, CTX)]
    assert found[0] == "launch_bound" and "sync_bound" not in found and "logging_heavy" not in found


def test_a_gpu_bound_hf_trainer_waiting_on_its_nan_filter_names_that_setting() -> None:
    """Where the GPU's work fills the step, the Trainer's per-step truth tests of the loss make the host wait for
    it every step, at any logging interval: the action names logging_nan_inf_filter first."""
    r = _hf_on_h100(20.0, {"data": 0.4, "forward": 2.0, "backward": 2.4, "optimizer": 0.3, "sync": 13.0},
                    busy=16.0, syncs=3.0, reads={"__bool__": 282})
    v = next(v for v in diagnose(r, CTX) if v.id == "sync_bound")
    assert v.action.startswith("TrainingArguments(logging_nan_inf_filter=False): 3 of the reads per step")
    assert "logging_steps=50" in v.action
    healthy_logs = _hf_on_h100(20.0, {"data": 0.4, "forward": 2.0, "backward": 2.4, "optimizer": 0.3, "sync": 13.0},
                               busy=16.0, syncs=3.0, reads={"item": 282})
    v = next(v for v in diagnose(healthy_logs, CTX) if v.id == "sync_bound")
    assert v.action.startswith("TrainingArguments(logging_steps=50)")


def test_batches_taken_whole_under_accelerate_are_advised_in_a_form_prepare_takes() -> None:
    """accelerator.prepare() rebuilds the DataLoader: batch_size=None beside a BatchSampler raised 'DataLoaderShard()
    got multiple values for keyword argument batch_size' there. The advice under accelerate is a TensorDataset
    with __getitems__ and a batch_size as usual, and that code runs through prepare() (checked here)."""
    from trainspeed.diagnose.rules import Context
    from trainspeed.diagnose.rules.frameworks import in_framework
    from trainspeed.probe.loader import Handover
    from trainspeed.watch.result import LoaderInfo

    two_cores = Context(dispatch_us=2.0, matmul_gflops=100.0, physical_cores=2, logical_threads=2,
                        handover=Handover(wall_ms=1.7, main_ms=0.8), batched_ms=0.15)
    rows = LoaderInfo(0, False, 64, False, dataset="TensorDataset", item_by_item=True, batchable=True, batches=620)
    r = recorded(0.9, {"data": 0.37, "forward": 0.1, "backward": 0.2, "optimizer": 0.15}, flops=2e6, batch=64,
                 loaders=[rows], threads=2)
    plain = dataclasses.replace(r, steps=dataclasses.replace(r.steps, mean_ms=0.95))
    generic = next(v for v in diagnose(plain, two_cores) if v.id == "input_bound")
    assert "batch_size=None, sampler=BatchSampler(RandomSampler(dataset), 64" in generic.action
    run = dataclasses.replace(plain, framework=Framework("accelerate", "1.15.0"))
    (v,) = in_framework([generic], run)
    assert "DataLoader(dataset, batch_size=None" not in v.action and "def __getitems__(self, indices)" in v.action
    assert v.action.count("once per batch") == 1 and v.action.endswith("or trainspeed.fit, which does that itself")
    assert "DataLoader(WholeBatches(*dataset.tensors), batch_size=64, shuffle=True, collate_fn=lambda batch: batch)" \
        in v.action

    accelerate = pytest.importorskip("accelerate")
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    class WholeBatches(TensorDataset):  # the action's code, as a user would paste it
        def __getitems__(self, indices):  # type: ignore[no-untyped-def]
            return [t[indices] for t in self.tensors]

    dataset = TensorDataset(torch.randn(100, 4), torch.randint(0, 3, (100,)))
    loader = accelerate.Accelerator(cpu=True).prepare(
        DataLoader(WholeBatches(*dataset.tensors), batch_size=64, shuffle=True, collate_fn=lambda batch: batch))
    x, y = next(iter(loader))
    assert x.shape == (64, 4) and y.shape == (64,) and sum(len(b[1]) for b in loader) == 100
