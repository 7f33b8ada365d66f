"""A verdict: what the rules conclude from a run's measurements; and the lever that applies its action, where one
can be set without editing the script (`trainspeed doctor --try` sets it in a run of its own)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

LEVER_KINDS = ("threads", "malloc", "dataloader", "optimizer", "anomaly_off", "validate_args_off", "matmul_precision",
               "lightning", "transformers", "patch")
"""What a lever sets: torch's intra-op threads; glibc malloc's thresholds (environment); a DataLoader's arguments;
an optimizer's (fused=True); autograd's anomaly detection off; torch.distributions' argument checks off; float32
matrix products' precision (TF32 on a GPU); a Lightning Trainer's or ModelCheckpoint's arguments; a Hugging Face
TrainingArguments' fields; `doctor --fix`'s edit of the script (its patched copy runs: `settings` name the lines)."""


@dataclass(frozen=True)
class Lever:
    """A setting that applies a verdict's action without editing the script: `kind` (one of LEVER_KINDS) and its
    `settings`, as `trainspeed.tryout.levers` applies them in a process of their own before the script runs."""

    kind: str
    settings: dict[str, Any]
    """JSON values: {"threads": 1}; {"num_workers": 2, "persistent_workers": True}; {"Trainer.val_check_interval":
    16}; {"MALLOC_MMAP_THRESHOLD_": "33554432"}."""
    paste: str
    """The exact line or setting the user would paste into the script (or its environment)."""
    same_arithmetic: bool
    """Whether the script computes the same numbers with it (threads, allocator, workers, anomaly checks off): its
    losses are then compared bit for bit; else (fused optimizer kernels, threads' sums in another order) the
    largest relative difference is reported."""
    recipe: str | None = None
    """What it changes in the training recipe (fewer evaluations, fewer saves); None: nothing."""
    match: dict[str, Any] = field(default_factory=dict)
    """Which objects it applies to where there may be several: a DataLoader's {"dataset": "TensorDataset",
    "batch_size": 64}, an optimizer's {"kind": "AdamW"}; empty: all."""


YOUR_SCRIPT = "<your script>"
"""Where a verdict's action names a command on the script (`trainspeed sweep threads -- <your script>`): the doctor's
report on a script it ran puts the script's path there (`named_script`); a report made inside a script keeps it."""


@dataclass(frozen=True)
class Verdict:
    """A diagnosis: what is wrong (id), the numbers that show it, what to do, what it should buy."""

    id: str
    evidence: str
    action: str
    predicted_speedup: float | None
    """Predicted (not measured) step speed-up if the action is taken; None when no model predicts it."""
    lever: Lever | None = None
    """The action as a setting `doctor --try` can apply and time; None: it needs an edit of the script."""
    site: str | None = None
    """The script's line the action edits (`file:line`), where the evidence names one: a read, a logging line, the
    script's own host code, the framework's settings."""
    title: str = ""
    """What is wrong in plain words ("Saving a checkpoint every step"): the first line of the verdict's short view."""
    brief: str = ""
    """The evidence in one line: the one or two numbers that show it, in units a user knows (ms per step, shares of
    the step or the run, counts). `evidence` holds every figure it rests on (`trainspeed explain ID`)."""
    fix: str = ""
    """The change in one line, as code to paste where it can be (at `site` where the run names the line)."""
    unpredicted: str | None = None
    """Why there is no predicted speed-up, where `predicted_speedup` is None ("memory is a limit, not a cost")."""
    bound: bool = False
    """Whether the prediction is an upper bound (the run without its wait, cores taken to run in parallel at full
    speed), said as "at most" wherever it is shown."""


def named_script(verdicts: list[Verdict], script: str) -> list[Verdict]:
    """The verdicts with YOUR_SCRIPT in their action and fix replaced by the script the doctor ran (as shell words: a
    path with spaces quoted; a module as `-m NAME`, in place of `-- SCRIPT`), so the command runs as printed."""
    import shlex

    if script.startswith("-m "):
        module = "-m " + shlex.quote(script[3:])
        pairs = [(f"-- {YOUR_SCRIPT}", module), (YOUR_SCRIPT, module)]
    else:
        pairs = [(YOUR_SCRIPT, shlex.quote(script))]

    def named(text: str) -> str:
        for placeholder, word in pairs:
            text = text.replace(placeholder, word)
        return text

    return [dataclasses.replace(v, action=named(v.action), fix=named(v.fix))
            if YOUR_SCRIPT in v.action or YOUR_SCRIPT in v.fix else v for v in verdicts]
