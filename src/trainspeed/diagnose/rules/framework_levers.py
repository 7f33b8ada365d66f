"""The levers of the verdicts said in a framework's settings (`frameworks.py` says the actions): the same intervals
and flags as settings `trainspeed doctor --try` applies to the Trainer, its ModelCheckpoint or TrainingArguments as
the script makes them. A verdict without one here keeps its own lever where that works inside the framework too
(threads, the allocator, a DataLoader the script builds, an optimizer class), and loses it where the framework
would refuse it."""

from __future__ import annotations

import math
from collections.abc import Callable

from trainspeed.diagnose.rules.input import busiest_loader
from trainspeed.diagnose.rules.periodic import at_interval, eval_interval, save_interval
from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.watch.result import WatchResult

LOG_EVERY = 50
"""The logging interval advised inside a framework: Lightning's default (`log_every_n_steps=50`)."""
NAN_FILTER_READS = 2
"""Device reads per step by Hugging Face's NaN filter (`logging_nan_inf_filter=True`): two truth tests of the loss."""

Pull = Callable[[Verdict, WatchResult], "Lever | None"]


def given(r: WatchResult) -> tuple[bool, bool]:
    """(the run draws a progress bar, it logs more often than LOG_EVERY) as its Trainer or TrainingArguments was
    set, where they were made while watched; (True, True) where unknown: the advice then names both."""
    settings = r.framework.settings if r.framework is not None else {}
    every = settings.get("log_every")
    return bool(settings.get("progress_bar", True)), not isinstance(every, int) or every < LOG_EVERY


def _lever(kind: str, settings: dict[str, object], same: bool = True, recipe: str | None = None) -> Lever | None:
    if not settings:
        return None
    owner = "TrainingArguments" if kind == "transformers" else None
    parts: dict[str, list[str]] = {}
    for key, value in settings.items():
        cls, _, name = key.rpartition(".")
        parts.setdefault(cls or owner or "Trainer", []).append(f"{name}={value!r}")
    paste = "; ".join(f"{cls}({', '.join(args)})" for cls, args in parts.items())
    return Lever(kind, settings, paste, same_arithmetic=same, recipe=recipe)


def _count(what: str, count: int, seen: int) -> str:
    return f"{what} {count} time{'s' if count != 1 else ''} in the run instead of {seen}"


# Lightning: Trainer(...) and ModelCheckpoint(...). An evaluation lever is not the same arithmetic: each evaluation's
# DataLoader iterator takes its seed from torch's random generator, so with fewer of them training draws other
# random numbers after the first one left out (measured: the losses of examples/frameworks/lightning_trainer.py
# differ after it).

def _pl_evaluation(v: Verdict, r: WatchResult) -> Lever | None:
    interval, seen = eval_interval(r), r.evaluation.seen if r.evaluation else 0
    if interval is None:
        return None
    train = busiest_loader(r)
    epoch = train.length if train is not None else None
    if epoch and interval[0] > epoch:  # as frameworks._pl_evaluation: past the epoch, every few epochs
        n = math.ceil(interval[0] / epoch)
        return _lever("lightning", {"Trainer.check_val_every_n_epoch": n}, same=False,
                      recipe=_count("validates", (r.steps.seen // epoch) // n, seen))
    count = at_interval(r.steps.seen, interval[0], epoch)
    return _lever("lightning", {"Trainer.val_check_interval": interval[0]}, same=False,
                  recipe=_count("validates", count, seen))


def _pl_checkpoint(v: Verdict, r: WatchResult) -> Lever | None:
    interval = save_interval(r)
    if interval is None:
        return None
    # ModelCheckpoint takes one of its triggers: the others off
    return _lever("lightning", {"ModelCheckpoint.every_n_train_steps": interval[0], "ModelCheckpoint.every_n_epochs": None,
                                "ModelCheckpoint.train_time_interval": None},
                  recipe=_count("saves", interval[1], r.checkpoints.saves))


def _quieter(r: WatchResult, kind: str, log_every: str, no_bar: tuple[str, bool],
             settings: dict[str, object] | None = None) -> Lever | None:
    """Logging every LOG_EVERY steps where the run logged more often, and no progress bar where it drew one."""
    bar, often = given(r)
    settings = dict(settings or {})
    if often:
        settings[log_every] = LOG_EVERY
    if bar:
        settings[no_bar[0]] = no_bar[1]
    return _lever(kind, settings, recipe=f"logs every {LOG_EVERY} steps" if often else None)


def _pl_logging(v: Verdict, r: WatchResult) -> Lever | None:
    return _quieter(r, "lightning", "Trainer.log_every_n_steps", ("Trainer.enable_progress_bar", False))


def _pl_host(v: Verdict, r: WatchResult) -> Lever | None:
    bar, _ = given(r)
    return _lever("lightning", {"Trainer.enable_progress_bar": False}) if bar else None


# Hugging Face: TrainingArguments(...)

def _hf_evaluation(v: Verdict, r: WatchResult) -> Lever | None:
    interval, seen = eval_interval(r), r.evaluation.seen if r.evaluation else 0
    if interval is None:
        return None
    return _lever("transformers", {"eval_strategy": "steps", "eval_steps": interval[0]}, same=False,
                  recipe=_count("evaluates", interval[1], seen))


def _hf_checkpoint(v: Verdict, r: WatchResult) -> Lever | None:
    interval = save_interval(r)
    if interval is None:
        return None
    if interval[0] > r.steps.seen:
        return _lever("transformers", {"save_strategy": "no"}, recipe=_count("saves", 0, r.checkpoints.saves))
    return _lever("transformers", {"save_strategy": "steps", "save_steps": interval[0]},
                  recipe=_count("saves", interval[1], r.checkpoints.saves))


def nan_filter_reads(r: WatchResult) -> float:
    """Truth tests of device tensors per step: Hugging Face's NaN filter makes NAN_FILTER_READS of them."""
    return sum(s.count for s in r.reads.sync_sites if s.op == "__bool__") / max(r.steps.measured, 1)


def _hf_logging(v: Verdict, r: WatchResult) -> Lever | None:
    filtered = v.id == "sync_bound" and nan_filter_reads(r) >= NAN_FILTER_READS
    return _quieter(r, "transformers", "logging_steps", ("disable_tqdm", True),
                    {"logging_nan_inf_filter": False} if filtered else None)


def _hf_host(v: Verdict, r: WatchResult) -> Lever | None:
    return _quieter(r, "transformers", "logging_steps", ("disable_tqdm", True))


def _hf_optimizer(v: Verdict, r: WatchResult) -> Lever | None:
    if r.optimizers.info is None or r.optimizers.info.kind != "AdamW":
        return None
    return _lever("transformers", {"optim": "adamw_torch_fused"}, same=False)


def _hf_loader(v: Verdict, r: WatchResult) -> Lever | None:
    if v.lever is None or "num_workers" not in v.lever.settings and "persistent_workers" not in v.lever.settings:
        return None  # a batch taken whole: the Trainer builds the DataLoader (an edit of its dataset)
    s = v.lever.settings
    settings: dict[str, object] = {}
    if "num_workers" in s:
        settings["dataloader_num_workers"] = s["num_workers"]
    settings["dataloader_persistent_workers"] = True
    if s.get("pin_memory"):
        settings["dataloader_pin_memory"] = True
    return _lever("transformers", settings)


def _hf_compile(v: Verdict, r: WatchResult) -> Lever | None:
    return _lever("transformers", {"dataloader_drop_last": True}, same=False,
                  recipe="each epoch's last, smaller batch left out")


def _only_workers(v: Verdict, r: WatchResult) -> Lever | None:
    """accelerate rebuilds the DataLoader in prepare() and refuses a batch taken whole: only the workers' lever."""
    return v.lever if v.lever is not None and not v.lever.settings.get("batched") else None


PULLS: dict[tuple[str, str], Pull] = {
    ("lightning", "evaluation_heavy"): _pl_evaluation,
    ("lightning", "checkpoint_heavy"): _pl_checkpoint,
    ("lightning", "logging_heavy"): _pl_logging,
    ("lightning", "sync_bound"): _pl_logging,
    ("lightning", "host_code_heavy"): _pl_host,
    ("lightning", "outside_work"): _pl_host,
    ("transformers", "evaluation_heavy"): _hf_evaluation,
    ("transformers", "checkpoint_heavy"): _hf_checkpoint,
    ("transformers", "logging_heavy"): _hf_logging,
    ("transformers", "sync_bound"): _hf_logging,
    ("transformers", "host_code_heavy"): _hf_host,
    ("transformers", "outside_work"): _hf_host,
    ("transformers", "optimizer_heavy"): _hf_optimizer,
    ("transformers", "input_bound"): _hf_loader,
    ("transformers", "compile_heavy"): _hf_compile,
    ("accelerate", "input_bound"): _only_workers,
}
"""(framework, verdict id) -> its lever in the framework's settings; a verdict not named keeps its own lever."""


def framework_lever(v: Verdict, r: WatchResult) -> Lever | None:
    """The verdict's lever inside the framework that ran the loop (its own where none is named)."""
    if r.framework is None:
        return v.lever
    pull = PULLS.get((r.framework.name, v.id))
    return pull(v, r) if pull is not None else v.lever
