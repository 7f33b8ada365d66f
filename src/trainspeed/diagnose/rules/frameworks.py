"""Verdicts said in the framework's language: where Lightning's or Hugging Face's Trainer (or accelerate) ran the
loop, the user does not write the loop's `for`, `model.eval()` or `torch.save`: they set the Trainer's arguments.
The evidence stays as measured; the action names the setting that changes it, with the figure the rule worked out.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable

from trainspeed.diagnose.rules.brief import LARGEST_BATCH
from trainspeed.diagnose.rules.framework_levers import (
    LOG_EVERY,
    NAN_FILTER_READS,
    framework_lever,
    given,
    nan_filter_reads,
)
from trainspeed.diagnose.rules.input import busiest_loader
from trainspeed.diagnose.rules.periodic import at_interval, counted, eval_interval, save_interval
from trainspeed.diagnose.verdict import Verdict
from trainspeed.watch.result import WatchResult

Speak = Callable[[Verdict, WatchResult], "str | None"]

_WORKERS = re.compile(r"DataLoader\(\.\.\., num_workers=(\d+), persistent_workers=True(, pin_memory=True)?\)")
_PERSISTENT = re.compile(r"DataLoader\(\.\.\., persistent_workers=True(, pin_memory=True)?\)")


def _advises_workers(action: str) -> bool:
    """Whether input_bound's action is one of its DataLoader settings (workers, kept workers), not a cheaper dataset."""
    return bool(_WORKERS.search(action) or _PERSISTENT.search(action))


OTHER_VERDICTS = ("host_code_heavy", "logging_heavy", "outside_work")
"""Verdicts about the time outside every named phase, which a framework's own code can hold."""
OWNS = 0.5


def _framework_owns_other(r: WatchResult) -> bool:
    """Whether most stack samples in "other" ran in the framework's own code."""
    return sum(f.share_of_other for f in r.sites.framework) >= OWNS


def _framework_evidence(r: WatchResult) -> str:
    top = ", ".join(f"{f.function} ({f.share_of_other:.0%})" for f in r.sites.framework[:3])
    return f"; in {r.framework.name if r.framework else 'the framework'}'s own code: {top} of those samples"


# Hugging Face's Trainer: every lever is an argument of TrainingArguments

def _hf_evaluation(v: Verdict, r: WatchResult) -> str:
    interval, seen = eval_interval(r), r.evaluation.seen if r.evaluation else 0
    if interval is not None:
        every, count = interval
        when = (f'TrainingArguments(eval_strategy="steps", eval_steps={every}) evaluates '
                f"{counted('time', count, seen, r.steps.seen)}")
    else:
        when = 'TrainingArguments(eval_strategy="epoch") evaluates once an epoch'
    return (f"{when}; a smaller eval_dataset (a fixed subset) and a larger per_device_eval_batch_size make each "
            "evaluation cheaper (it keeps no activations)")


def _hf_checkpoint(v: Verdict, r: WatchResult) -> str:
    interval = save_interval(r)
    if interval is not None and interval[0] > r.steps.seen:  # no save at all in a run this long
        when = f'TrainingArguments(save_strategy="no") saves nothing in this run\'s {r.steps.seen} steps (was {r.checkpoints.saves})'
    elif interval is not None:
        when = f"TrainingArguments(save_steps={interval[0]}) saves {counted('time', interval[1], r.checkpoints.saves, r.steps.seen)}"
    else:
        when = 'TrainingArguments(save_strategy="epoch") saves once an epoch'
    return (f"{when}; save_only_model=True leaves out the optimizer's state (AdamW's two moments are twice the "
            "weights), save_total_limit keeps the disk from filling")


def _hf_logging(v: Verdict, r: WatchResult) -> str:
    bar, often = given(r)
    parts = [f"TrainingArguments(logging_steps={LOG_EVERY}) (the Trainer averages the loss between logs on the "
             "device)"] if often else []
    parts.append("no callback that prints or reads a tensor in on_step_end")
    if bar:
        parts.append("disable_tqdm=True where the progress bar is not read")
    action = ", and ".join(parts[:2]) + ("; " + parts[2] if len(parts) > 2 else "")
    checks = nan_filter_reads(r)
    if v.id == "sync_bound" and checks >= NAN_FILTER_READS:
        # the reads are the Trainer's own check of each step's loss, whatever the logging interval
        action = (f"TrainingArguments(logging_nan_inf_filter=False): {checks:.0f} of the reads per step are truth "
                  "tests of device tensors, as the Trainer's check of each step's loss for NaN or inf makes them "
                  "(it reads the loss on every step, whatever logging_steps is); then " + action)
    return action


def _hf_dtype(v: Verdict, r: WatchResult) -> str:
    if v.id == "slow_dtype":
        return "drop TrainingArguments(bf16=True) / fp16=True on this CPU: " + v.action
    return ("healthy; the next levers are TrainingArguments(bf16=True) where the hardware has bfloat16, "
            "torch_compile=True, or a larger per_device_train_batch_size")


def _hf_optimizer(v: Verdict, r: WatchResult) -> str:
    return ('TrainingArguments(optim="adamw_torch_fused"): one kernel updates every parameter tensor (the default '
            '"adamw_torch" loops over them)')


def _hf_recompute(v: Verdict, r: WatchResult) -> str:
    """transformers 5 names the setting `activation_checkpointing`; earlier releases `gradient_checkpointing`."""
    major = (r.framework.version or "").split(".")[0] if r.framework else ""
    setting = "gradient_checkpointing" if major.isdigit() and int(major) < 5 else "activation_checkpointing"
    return (f"TrainingArguments({setting}=False) where memory allows: each block then keeps its activations for "
            "backward, so the peak grows; where that does not fit, a smaller per_device_train_batch_size with "
            "gradient_accumulation_steps")


def _hf_compile(v: Verdict, r: WatchResult) -> str:
    return ("TrainingArguments(dataloader_drop_last=True) keeps every training batch one shape, and a data collator "
            "that pads to fixed lengths (DataCollatorWithPadding(tokenizer, padding=\"max_length\"), or "
            "pad_to_multiple_of=64) keeps the sequence lengths few; TORCH_LOGS=recompiles prints why each one happened")


def _hf_batch(v: Verdict, r: WatchResult) -> str | None:
    if not r.model.batch_size:
        return None
    return (f"TrainingArguments(per_device_train_batch_size={r.model.batch_size * 4}) and a learning rate scaled to it; "
            + LARGEST_BATCH)


def _hf_loader(v: Verdict, r: WatchResult) -> str:
    """The Trainer builds the DataLoader: its workers are arguments, and the rest is the dataset's work."""
    if _advises_workers(v.action):
        text = _WORKERS.sub(lambda m: f"TrainingArguments(dataloader_num_workers={m.group(1)}, "
                            "dataloader_persistent_workers=True" + (", dataloader_pin_memory=True" if m.group(2) else "")
                            + ")", v.action)
        return _PERSISTENT.sub("TrainingArguments(dataloader_persistent_workers=True)", text)
    return ("tokenize (or decode) once, before training: Hugging Face datasets' `dataset.map(tokenize, batched=True)`, "
            "or in the dataset's __init__; __getitem__ and the data collator then only index and stack ids. "
            "TrainingArguments(dataloader_num_workers=N) moves that work beside the step only where the machine has "
            "cores the step does not use")


# PyTorch Lightning: Trainer arguments, callbacks' arguments and self.log's

def _pl_evaluation(v: Verdict, r: WatchResult) -> str:
    interval, seen = eval_interval(r), r.evaluation.seen if r.evaluation else 0
    train = busiest_loader(r)
    epoch = train.length if train is not None else None
    if interval is None:
        when = "Trainer(check_val_every_n_epoch=...) validates every few epochs instead of every one"
    elif epoch and interval[0] > epoch:  # Lightning refuses a val_check_interval past the epoch's batches
        n = math.ceil(interval[0] / epoch)
        count = (r.steps.seen // epoch) // n
        when = (f"Trainer(check_val_every_n_epoch={n}) (val_check_interval may not pass the epoch's {epoch} batches) "
                f"validates {counted('time', count, seen, r.steps.seen)}")
    else:
        count = at_interval(r.steps.seen, interval[0], epoch)
        when = f"Trainer(val_check_interval={interval[0]}) validates {counted('time', count, seen, r.steps.seen)}"
    return (f"{when}; Trainer(limit_val_batches=...) validates on a fixed part of the validation data, and a larger "
            "validation batch_size makes each pass cheaper (it keeps no activations)")


def _pl_checkpoint(v: Verdict, r: WatchResult) -> str:
    interval = save_interval(r)
    if interval is not None:
        when = (f"ModelCheckpoint(every_n_train_steps={interval[0]}) saves "
                f"{counted('time', interval[1], r.checkpoints.saves, r.steps.seen)}")
    else:
        when = "ModelCheckpoint(every_n_epochs=1) saves once an epoch"
    return (f"{when}; save_weights_only=True leaves out the optimizer's state, save_top_k bounds the files kept")


def _pl_logging(v: Verdict, r: WatchResult) -> str:
    """Lightning's logging settings, less those the run's Trainer has already (a script that turned its progress bar
    off was told to turn it off)."""
    bar, often = given(r)
    action = (f"Trainer(log_every_n_steps={LOG_EVERY}) (Lightning's default), and " if often else "") + (
        "self.log(..., on_step=False, on_epoch=True) for values only the epoch's mean matters for (sync_dist=True "
        "only where ranks must agree: it reduces across ranks every call)")
    return action + ("; enable_progress_bar=False where the bar is not read" if bar else "")


def _pl_dtype(v: Verdict, r: WatchResult) -> str:
    if v.id == "slow_dtype":
        return 'Trainer(precision="32-true") on this CPU: ' + v.action
    return ('healthy; the next levers are Trainer(precision="bf16-mixed") where the hardware has bfloat16, '
            "torch.compile(model) before trainer.fit, or a larger batch_size in the DataLoader")


def _pl_optimizer(v: Verdict, r: WatchResult) -> str:
    kind = r.optimizers.info.kind if r.optimizers.info is not None else "AdamW"
    return (f"return torch.optim.{kind}(self.parameters(), ..., fused=True) from configure_optimizers: one kernel "
            "updates every parameter tensor")


def _pl_loader(v: Verdict, r: WatchResult) -> str:
    where = " (in train_dataloader() or the LightningDataModule that builds the DataLoader)"
    if _advises_workers(v.action):
        return v.action + where
    # its first clause is the short fix, at the dataset's line the samples name: short enough for the five lines
    return ("augment whole batches in on_after_batch_transfer, not per sample in __getitem__ (in the "
            "LightningModule's on_after_batch_transfer, on the device, random parameters drawn per sample); precompute "
            "what is the same every epoch (decode, resize) once. " + v.action)


def _pl_host(v: Verdict, r: WatchResult) -> str | None:
    if not _framework_owns_other(r):
        return None
    bar, _ = given(r)
    levers = ("Trainer(enable_progress_bar=False) or TQDMProgressBar(refresh_rate=50), fewer callbacks that run on "
              "every batch" if bar else "fewer callbacks that run on every batch (the progress bar is off already)")
    return ("Lightning's own work on every step (its loop, callbacks, self.log, the progress bar): " + levers +
            "; or a larger batch_size in the DataLoader, which spreads that fixed cost over more samples")


def _hf_host(v: Verdict, r: WatchResult) -> str | None:
    if not _framework_owns_other(r):
        return None
    bar, often = given(r)
    named = [name for name, keep in (("disable_tqdm=True", bar), (f"logging_steps={LOG_EVERY}", often)) if keep]
    levers = (f"TrainingArguments({', '.join(named)}), fewer callbacks" if named else "fewer callbacks (its progress "
              "bar is off and it logs rarely already)")
    return ("the Trainer's own work on every step (its loop, callbacks, logging): " + levers +
            "; or a larger per_device_train_batch_size, which spreads that fixed cost over more samples")


# accelerate: the Accelerator's arguments

def _acc_dtype(v: Verdict, r: WatchResult) -> str:
    if v.id == "slow_dtype":
        return 'Accelerator(mixed_precision="no") on this CPU: ' + v.action
    return ('healthy; the next levers are Accelerator(mixed_precision="bf16") where the hardware has bfloat16, '
            'torch.compile (Accelerator(dynamo_backend="inductor")), or a larger batch')


WHOLE_BATCHES = re.compile(r"take each batch whole: DataLoader\(dataset, batch_size=None, sampler=BatchSampler\("
                           r"RandomSampler\(dataset\), (\w+), drop_last=False\)(, num_workers=0)?\)")


def _acc_loader(v: Verdict, r: WatchResult) -> str | None:
    """input_bound's batches taken whole, in a form accelerator.prepare() takes: it rebuilds the DataLoader with its
    batch_size and refuses batch_size=None beside a sampler ('DataLoaderShard() got multiple values for keyword
    argument batch_size'). A TensorDataset with `__getitems__` is indexed once per batch by torch's own fetcher,
    with a batch_size as usual."""
    found = WHOLE_BATCHES.search(v.action)
    if found is None:
        return None
    size, workers = found.group(1), found.group(2) or ""
    whole = ("take each batch whole, in a form accelerator.prepare() rebuilds (it refuses batch_size=None beside a "
             "sampler): class WholeBatches(TensorDataset): def __getitems__(self, indices): return [t[indices] for t "
             f"in self.tensors]; then DataLoader(WholeBatches(*dataset.tensors), batch_size={size}, shuffle=True, "
             f"collate_fn=lambda batch: batch{workers}) - torch's fetcher then indexes each tensor once per batch "
             "(shuffle=False for a loader without shuffle)")
    end = v.action.find("; or trainspeed.fit", found.end())  # the plain form's notes on samplers go with it
    return v.action[:found.start()] + whole + v.action[end if end >= 0 else found.end():]


MADE_BY: dict[tuple[str, str], tuple[str, ...]] = {
    ("lightning", "checkpoint_heavy"): ("ModelCheckpoint", "Trainer"),
    ("lightning", "optimizer_heavy"): (),
    ("lightning", "input_bound"): (),
    ("lightning", "small_batch"): (),
}
"""(framework, verdict) -> the setting objects whose line the action points at, the first one made; by default
the framework's own (Lightning's Trainer, TrainingArguments, the Accelerator)."""
OWN = {"lightning": ("Trainer",), "transformers": ("TrainingArguments",), "accelerate": ("Accelerator",)}


def _made(v: Verdict, r: WatchResult) -> tuple[str, str] | None:
    """("Trainer", "train.py:40"): the setting object the action changes and the user's line that made it."""
    fw = r.framework
    if fw is None:
        return None
    for name in MADE_BY.get((fw.name, v.id), OWN.get(fw.name, ())):
        if name in fw.made_at:
            return name, fw.made_at[name]
    return None


def _where(v: Verdict, r: WatchResult) -> str:
    """" (Trainer(...) at train.py:40)": the user's line that made the setting the action changes."""
    made = _made(v, r)
    return f" ({made[0]}(...) at {made[1]})" if made is not None else ""


SPEAK: dict[tuple[str, str], Speak] = {
    ("transformers", "evaluation_heavy"): _hf_evaluation,
    ("transformers", "checkpoint_heavy"): _hf_checkpoint,
    ("transformers", "logging_heavy"): _hf_logging,
    ("transformers", "sync_bound"): _hf_logging,
    ("transformers", "compute_bound"): _hf_dtype,
    ("transformers", "slow_dtype"): _hf_dtype,
    ("transformers", "optimizer_heavy"): _hf_optimizer,
    ("transformers", "small_batch"): _hf_batch,
    ("transformers", "input_bound"): _hf_loader,
    ("transformers", "host_code_heavy"): _hf_host,
    ("transformers", "recompute_heavy"): _hf_recompute,
    ("transformers", "compile_heavy"): _hf_compile,
    ("transformers", "outside_work"): _hf_host,
    ("lightning", "evaluation_heavy"): _pl_evaluation,
    ("lightning", "checkpoint_heavy"): _pl_checkpoint,
    ("lightning", "logging_heavy"): _pl_logging,
    ("lightning", "sync_bound"): _pl_logging,
    ("lightning", "compute_bound"): _pl_dtype,
    ("lightning", "slow_dtype"): _pl_dtype,
    ("lightning", "optimizer_heavy"): _pl_optimizer,
    ("lightning", "input_bound"): _pl_loader,
    ("lightning", "host_code_heavy"): _pl_host,
    ("lightning", "outside_work"): _pl_host,
    ("accelerate", "compute_bound"): _acc_dtype,
    ("accelerate", "slow_dtype"): _acc_dtype,
    ("accelerate", "input_bound"): _acc_loader,
}
"""(framework, verdict id) -> the action in the framework's settings; a verdict not named keeps its action."""


_UNSET = re.compile(r", \w+=None\b")
"""A lever's arguments set to None (ModelCheckpoint(..., every_n_epochs=None)): the defaults a user leaves out."""


def _first_clause(action: str) -> str:
    """An action's first clause, up to its first ": ", "; " or ". ", its asides in parentheses left out (the setting;
    the why follows)."""
    ends = [i for i in (action.find(": "), action.find("; "), action.find(". ")) if i > 0]
    first = action[:min(ends)] if ends else action
    return re.sub(r" \([^()]*\)", "", first)


def in_framework(verdicts: list[Verdict], r: WatchResult) -> list[Verdict]:
    """The verdicts with their actions said in the settings of the framework that ran the loop (if any)."""
    if r.framework is None:
        return verdicts
    spoken = []
    for v in verdicts:
        speak = SPEAK.get((r.framework.name, v.id))
        action = speak(v, r) if speak is not None else None
        lever = framework_lever(v, r)
        fix, site = v.fix, v.site
        if action:  # the fix is the framework's setting, at the line that made it
            fix = _UNSET.sub("", lever.paste) if lever is not None and lever != v.lever else _first_clause(action)
            made = _made(v, r)
            site = made[1] if made is not None else site
            action += _where(v, r)
        evidence = v.evidence + _framework_evidence(r) if v.id in OTHER_VERDICTS and r.sites.framework else v.evidence
        spoken.append(dataclasses.replace(v, action=action or v.action, evidence=evidence, lever=lever, fix=fix,
                                          site=site))
    return spoken
