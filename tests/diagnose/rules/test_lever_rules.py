"""The levers the rules give with their actions (diagnose/verdict.Lever): the same figure as the action, as a setting
`doctor --try` applies; inside a framework, the framework's own setting; none where the action needs an edit."""

from __future__ import annotations

import dataclasses

from recorded_runs import CTX, adamw_run, recorded, with_load

from trainspeed.diagnose.rules import Context, diagnose
from trainspeed.diagnose.rules.frameworks import in_framework
from trainspeed.probe.loader import Handover
from trainspeed.watch.frameworks import Framework
from trainspeed.watch.result import Evaluation, LoaderInfo, OptimizerInfo

HF = Framework("transformers", "5.24.0")
PL = Framework("lightning", "2.6.6")
TWO = Context(dispatch_us=2.0, matmul_gflops=100.0, physical_cores=2, logical_threads=2)


def _first(r, ctx=CTX):  # type: ignore[no-untyped-def]
    return diagnose(r, ctx)[0]


def test_threads_on_a_shared_machine_are_a_lever_of_the_actions_count() -> None:
    base = recorded(0.5, {"forward": 0.15, "backward": 0.2, "optimizer": 0.1}, ops=None, threads=2)
    busy = dataclasses.replace(with_load(base, others_cpu_cores=0.64),
                               steps=dataclasses.replace(base.steps, times_ms=[0.45] * 8 + [4.5, 4.6], p90_ms=4.5))
    v = next(v for v in diagnose(busy, TWO) if v.id == "thread_oversubscription")
    assert v.lever is not None and v.lever.kind == "threads" and v.lever.settings == {"threads": 1}
    assert v.lever.paste in v.action and not v.lever.same_arithmetic


def _evaluating(framework: Framework | None):  # type: ignore[no-untyped-def]
    r = recorded(3.76, {"forward": 1.3, "backward": 1.6, "optimizer": 0.27}, flops=2.7e8, batch=512, threads=2)
    return dataclasses.replace(r, framework=framework, evaluation=Evaluation(count=19, mean_ms=142.5, share=0.43,
                                                                             every_steps=5.0, in_run=20))


def test_evaluating_less_often_is_a_lever_inside_a_framework_and_an_edit_outside() -> None:
    assert _first(_evaluating(None)).lever is None  # the script's own loop: an edit
    pl, hf = _first(_evaluating(PL)).lever, _first(_evaluating(HF)).lever
    assert pl is not None and pl.settings == {"Trainer.val_check_interval": 20}
    assert pl.paste == "Trainer(val_check_interval=20)" and pl.recipe == "validates 5 times in the run instead of 20"
    assert hf is not None and hf.settings == {"eval_strategy": "steps", "eval_steps": 20}
    assert hf.paste == "TrainingArguments(eval_strategy='steps', eval_steps=20)"


def test_saving_less_often_is_the_checkpoints_trigger() -> None:
    r = recorded(10.0, {"forward": 3.0, "backward": 4.0, "optimizer": 1.0, "checkpoint": 1.5}, flops=1e10)
    saving = dataclasses.replace(r, checkpoints=dataclasses.replace(r.checkpoints, saves=100, calls=400,
                                                                    every_steps=1.0))
    pl = _first(dataclasses.replace(saving, framework=PL)).lever
    assert pl is not None and pl.settings["ModelCheckpoint.every_n_train_steps"] == 15
    assert pl.paste.startswith("ModelCheckpoint(every_n_train_steps=15, every_n_epochs=None")
    hf = _first(dataclasses.replace(saving, framework=HF)).lever
    assert hf is not None and hf.settings == {"save_strategy": "steps", "save_steps": 15}
    assert hf.recipe == "saves 6 times in the run instead of 100"


def test_a_fused_optimizer_is_the_named_class_and_hugging_faces_optim_name() -> None:
    ctx = Context(dispatch_us=2.0, matmul_gflops=110.0, physical_cores=2, logical_threads=2, optimizer_ms=(7.42, 1.40))
    v = next(v for v in diagnose(adamw_run(), ctx) if v.id == "optimizer_heavy")
    assert v.lever is not None
    assert (v.lever.kind, v.lever.settings, v.lever.match) == ("optimizer", {"fused": True}, {"kind": "AdamW"})
    (hf,) = in_framework([v], dataclasses.replace(adamw_run(), framework=HF))
    assert hf.lever is not None and hf.lever.settings == {"optim": "adamw_torch_fused"}
    sgd = dataclasses.replace(adamw_run(), framework=HF)
    sgd = dataclasses.replace(sgd, optimizers=dataclasses.replace(sgd.optimizers,
                                                                  info=OptimizerInfo("SGD", 162, 44932, False, None)))
    assert in_framework([v], sgd)[0].lever is None  # the Trainer's optim names no fused SGD


def test_a_batch_taken_whole_is_a_lever_except_where_accelerate_rebuilds_the_loader() -> None:
    ctx = dataclasses.replace(TWO, handover=Handover(wall_ms=1.7, main_ms=0.8), batched_ms=0.15)
    rows = LoaderInfo(0, False, 64, False, dataset="TensorDataset", item_by_item=True, batchable=True, batches=620)
    r = recorded(0.9, {"data": 0.37, "forward": 0.1, "backward": 0.2, "optimizer": 0.15}, flops=2e6, batch=64,
                 loaders=[rows], threads=2)
    r = dataclasses.replace(r, steps=dataclasses.replace(r.steps, mean_ms=0.95))
    v = next(v for v in diagnose(r, ctx) if v.id == "input_bound")
    assert v.lever is not None and v.lever.settings == {"batched": True} and v.lever.same_arithmetic
    assert v.lever.match == {"dataset": "TensorDataset", "batch_size": 64}
    assert in_framework([v], dataclasses.replace(r, framework=Framework("accelerate", "1.15.0")))[0].lever is None


def test_a_recompile_for_the_last_batch_is_a_drop_last_lever_that_changes_the_recipe() -> None:
    from trainspeed.watch.result import Compiles

    r = recorded(1.124, {"forward": 0.28, "backward": 0.38, "optimizer": 0.4}, ops=75, flops=2e7, batch=100, threads=2,
                 loaders=[LoaderInfo(0, False, 100, False, dataset="TensorDataset", batches=110)])
    r = dataclasses.replace(r, steps=dataclasses.replace(r.steps, measured=102, mean_ms=2.6),
                            window=dataclasses.replace(r.window, compiled=True), machine=dataclasses.replace(r.machine, compiles=Compiles(1, 0.145)))
    v = _first(r)
    assert v.id == "compile_heavy" and v.lever is not None
    assert v.lever.settings == {"drop_last": True} and v.lever.recipe == "each epoch's last, smaller batch left out"
    assert v.lever.match == {"dataset": "TensorDataset", "batch_size": 100} and not v.lever.same_arithmetic
    (hf,) = in_framework([v], dataclasses.replace(r, framework=HF))
    assert hf.lever is not None and hf.lever.settings == {"dataloader_drop_last": True}
    assert _first(dataclasses.replace(r, loaders=dataclasses.replace(r.loaders,
                                                                     each=[]))).lever is None  # no loader seen: nothing to set
