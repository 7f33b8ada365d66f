"""Which training framework runs the loop, read off the call stack of the run's first backward, and what the doctor
knows of each framework (its settings' oldest releases, its checkpoint calls, its label).

The outermost framework on the stack is the one whose settings the user writes: Hugging Face's Trainer calls
`accelerate` inside, and that is the Trainer's business. A loop the user wrote around `accelerate` or Lightning
Fabric has only that library on the stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import metadata
from types import FrameType
from typing import Any

# (module prefix, framework, distributions to read its version from), innermost libraries last
KNOWN: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("lightning.pytorch.", "lightning", ("lightning", "pytorch-lightning")),
    ("pytorch_lightning.", "lightning", ("pytorch-lightning", "lightning")),
    ("lightning.fabric.", "fabric", ("lightning", "lightning-fabric")),
    ("lightning_fabric.", "fabric", ("lightning-fabric", "lightning")),
    ("transformers.", "transformers", ("transformers",)),
    ("trl.", "transformers", ("transformers",)),
    ("accelerate.", "accelerate", ("accelerate",)),
    ("ignite.", "ignite", ("pytorch-ignite",)),
    ("skorch.", "skorch", ("skorch",)),
)
SUPPORTED = {"lightning": "2.0", "transformers": "4.40", "accelerate": "0.26", "ignite": "0.4.11", "skorch": "0.15"}
"""The oldest release of each framework whose settings the verdicts name (the releases tried are newer)."""

FRAMEWORK_SAVES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "transformers": (("transformers.trainer", "Trainer", "_save_checkpoint"),),
    # ModelCheckpoint's hooks save, and then remove the file a save_top_k leaves behind, outside save_checkpoint
    "lightning": tuple((f"{package}.{module}", owner, method) for package in ("lightning.pytorch", "pytorch_lightning")
                       for module, owner, method in (
                           ("trainer.trainer", "Trainer", "save_checkpoint"),
                           ("callbacks.model_checkpoint", "ModelCheckpoint", "on_train_batch_end"),
                           ("callbacks.model_checkpoint", "ModelCheckpoint", "on_train_epoch_end"),
                           ("callbacks.model_checkpoint", "ModelCheckpoint", "on_validation_end"))),
}
"""Per framework: (module, class, method) of the call that writes one whole checkpoint."""


LABELS = {"lightning": "PyTorch Lightning's Trainer", "fabric": "Lightning Fabric", "transformers": "Hugging Face's Trainer",
          "accelerate": "an accelerate loop", "ignite": "PyTorch-Ignite's Engine", "skorch": "skorch's NeuralNet"}


@dataclass(frozen=True)
class Framework:
    name: str
    """"lightning", "fabric", "transformers", "accelerate", "ignite" or "skorch"."""
    version: str | None
    made_at: dict[str, str] = field(default_factory=dict)
    """The user's line that made each of its setting objects, by class ("Trainer": "train.py:40"; watch/made_at.py)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """What its Trainer or TrainingArguments was given that the advice checks: `progress_bar` (drawn or not),
    `log_every` (the logging interval in steps); empty where none was made while watched."""


def framework_label(fw: Framework) -> str:
    """"Hugging Face's Trainer (transformers 5.24.0)"."""
    version = f" {fw.version}" if fw.version else ""
    return f"{LABELS.get(fw.name, fw.name)} ({fw.name}{version})"


def _framework_of(module: str) -> tuple[str, tuple[str, ...]] | None:
    for prefix, name, dists in KNOWN:
        if module.startswith(prefix) or module == prefix[:-1]:
            return name, dists
    return None


def _version(dists: tuple[str, ...]) -> str | None:
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def outermost(frame: FrameType | None) -> Framework | None:
    """The framework of the outermost frame on the stack from `frame` that belongs to one (None: a plain loop)."""
    found: tuple[str, tuple[str, ...]] | None = None
    while frame is not None:
        hit = _framework_of(frame.f_globals.get("__name__") or "")
        if hit is not None:
            found = hit
        frame = frame.f_back
    return Framework(found[0], _version(found[1])) if found is not None else None


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def unsupported_note(fw: Framework) -> str | None:
    """One line where the framework's release is older than the verdicts' settings assume (None: supported)."""
    oldest = SUPPORTED.get(fw.name)
    if oldest is None or fw.version is None or _release(fw.version) >= _release(oldest):
        return None
    return (f"{fw.name} {fw.version} is older than the releases whose settings the verdicts name ({fw.name} >= "
            f"{oldest}); the measurements hold, a setting named may be spelled otherwise there")
