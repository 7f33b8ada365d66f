"""Where the script set up its training framework: the user's line that made the Trainer, the ModelCheckpoint, the
TrainingArguments or the Accelerator, so that an action can point at the line to change.

While watching, each of those classes is wrapped as its module loads (a finder on `sys.meta_path` runs the real
loader, then wraps), or at once where the module is loaded already. Only the first object of each class made is
noted (the run's own; a subclass made by the framework itself is not the user's line). An object made before
watching began (a callback attached to a Trainer made earlier) has no line here.
"""

from __future__ import annotations

import functools
import importlib.abc
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

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


class _ThenWrap(importlib.abc.Loader):
    """A module's own loader, and the wrapping after it ran; every other attribute is the loader's."""

    def __init__(self, loader: Any, then: Callable[[ModuleType], None]) -> None:
        self._loader, self._then = loader, then

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._then(module)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # our own fields, asked before they are set (a copy being made), and dunders
            raise AttributeError(name)
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, wrap: Callable[[ModuleType], None]) -> None:
        self.wrap = wrap

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in WATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenWrap(spec.loader, self.wrap)
                return spec
        return None


class MadeAt:
    """The user's lines that made the framework's setting objects, by class name (`sites`)."""

    def __init__(self) -> None:
        self.sites: dict[str, str] = {}
        self.settings: dict[str, Any] = {}
        """The first Trainer's or TrainingArguments' settings that the advice checks (`SETTINGS`)."""
        self._undo: list[tuple[type, str, Any]] = []
        self._finder: _Finder | None = None

    def install(self) -> None:
        for name in WATCHED:
            module = sys.modules.get(name)
            if module is not None:
                self._wrap(module)
        self._finder = _Finder(self._wrap)
        sys.meta_path.insert(0, self._finder)

    def uninstall(self) -> None:
        if self._finder is not None and self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        self._finder = None
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
