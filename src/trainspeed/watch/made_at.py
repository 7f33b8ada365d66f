"""The training framework of a watched run (`FrameworkTracker`), and where the script set it up: the user's line that
made the Trainer, the ModelCheckpoint, the TrainingArguments or the Accelerator, so that an action can point at the
line to change.

While watching, each of those classes is wrapped as its module loads (`trainspeed._after_import`), or at once where
the module is loaded already. Only the first object of each class made is
noted (the run's own; a subclass made by the framework itself is not the user's line). An object made before
watching began (a callback attached to a Trainer made earlier) has no line here.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

from trainspeed._after_import import AfterImport
from trainspeed.watch.frameworks import Framework, outermost
from trainspeed.watch.lines import frame_site
from trainspeed.watch.syncs import is_user_code

# module -> (class, the method every construction runs); TrainingArguments is a dataclass whose subclasses
# (Seq2SeqTrainingArguments, TRL's configs) have __init__s of their own but call its __post_init__
WATCHED: dict[str, tuple[tuple[str, str], ...]] = {
    "lightning.pytorch.trainer.trainer": (("Trainer", "__init__"),),
    "pytorch_lightning.trainer.trainer": (("Trainer", "__init__"),),
    "lightning.pytorch.callbacks.model_checkpoint": (("ModelCheckpoint", "__init__"),),
    "pytorch_lightning.callbacks.model_checkpoint": (("ModelCheckpoint", "__init__"),),
    "transformers.training_args": (("TrainingArguments", "__post_init__"),),
    "accelerate.accelerator": (("Accelerator", "__init__"),),
}


def _trainer_settings(trainer: Any) -> dict[str, Any]:
    """What a Lightning Trainer was given that the advice would otherwise repeat."""
    return {"progress_bar": getattr(trainer, "progress_bar_callback", True) is not None,
            "log_every": getattr(trainer, "log_every_n_steps", None)}


def _training_arguments_settings(args: Any) -> dict[str, Any]:
    """The same of Hugging Face's TrainingArguments."""
    return {"progress_bar": not getattr(args, "disable_tqdm", False), "log_every": getattr(args, "logging_steps", None)}


SETTINGS: dict[str, Callable[[Any], dict[str, Any]]] = {"Trainer": _trainer_settings,
                                                        "TrainingArguments": _training_arguments_settings}
"""By class: the settings read off the first object made, after its construction (`progress_bar`: whether a
progress bar is drawn; `log_every`: the logging interval in steps)."""


def user_site(frame: Any) -> str | None:
    """`file:line` of the innermost frame of the user's own code from `frame` outward (generated code, such as a
    dataclass's __init__, left out); None where there is none."""
    while frame is not None:
        code = frame.f_code
        if is_user_code(code) and not code.co_filename.startswith("<"):
            return frame_site(frame)
        frame = frame.f_back
    return None


class MadeAt:
    """The user's lines that made the framework's setting objects, by class name (`sites`)."""

    def __init__(self) -> None:
        self.sites: dict[str, str] = {}
        self.settings: dict[str, Any] = {}
        """The first Trainer's or TrainingArguments' settings that the advice checks (`SETTINGS`)."""
        self._undo: list[tuple[type, str, Any]] = []
        self._finder = AfterImport(WATCHED, self._wrap)

    def install(self) -> None:
        self._finder.install()

    def uninstall(self) -> None:
        self._finder.uninstall()
        while self._undo:
            owner, method, original = self._undo.pop()
            setattr(owner, method, original)

    def _wrap(self, module: ModuleType) -> None:
        for class_name, method in WATCHED.get(module.__name__, ()):
            owner = getattr(module, class_name, None)
            original = vars(owner).get(method) if isinstance(owner, type) else None
            if owner is None or original is None:
                continue
            setattr(owner, method, self._noting(class_name, original))
            self._undo.append((owner, method, original))

    def _noting(self, class_name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        sites, settings, read = self.sites, self.settings, SETTINGS.get(class_name)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            first = class_name not in sites
            if first:
                site = user_site(sys._getframe(1))
                if site is not None:
                    sites[class_name] = site
            made = original(*args, **kwargs)
            if first and read is not None and args and not settings:
                try:
                    settings.update(read(args[0]))
                except Exception:  # a framework version shaped otherwise: the advice stays as written
                    pass
            return made
        return wrapper


class FrameworkTracker:
    """The training framework that runs the loop: read off the stack of the first backward (Lightning calls
    backward inside the optimizer's closure: before the step's end), with the user's lines that set it up."""

    def __init__(self) -> None:
        self.framework: Framework | None = None
        self.read = False
        self.made_at = MadeAt()

    def backward_seen(self, frame: FrameType | None) -> Framework | None:
        """A backward returned, called from `frame`: the framework, the first time (None after, or for none)."""
        if self.read:
            return None
        self.read = True
        self.framework = outermost(frame)
        return self.framework

    def install(self) -> None:
        self.made_at.install()

    def uninstall(self) -> None:
        self.made_at.uninstall()

    def part(self) -> Framework | None:
        fw = self.framework
        return (dataclasses.replace(fw, made_at=dict(self.made_at.sites), settings=dict(self.made_at.settings))
                if fw is not None else None)
