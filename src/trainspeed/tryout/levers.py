"""A verdict's lever applied in this process before the script runs, never by writing to the script's files:
torch's settings set, and the classes the script will build (a DataLoader, an optimizer, Lightning's Trainer,
TrainingArguments) wrapped so that the objects it makes get the lever's arguments. `environment` gives what must be
in a process's environment as it starts (glibc's malloc thresholds, OMP_NUM_THREADS)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from trainspeed._after_import import AfterImport
from trainspeed.diagnose.verdict import Lever


def environment(lever: Lever) -> dict[str, str]:
    """The environment variables the lever sets in the process it runs in."""
    if lever.kind == "malloc":
        return {k: str(v) for k, v in lever.settings.items()}
    threads = lever.settings.get("threads")
    return {"OMP_NUM_THREADS": str(threads)} if threads is not None else {}


def _wrap_init(cls: type, change: Callable[[inspect.BoundArguments], None], method: str = "__init__") -> None:
    """Wrap `cls.method` so that its arguments, bound to its signature (positional ones too), pass through `change`."""
    original = vars(cls)[method]
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        change(bound)
        return original(*bound.args, **bound.kwargs)

    setattr(cls, method, wrapper)


def _pin(setter: str, value: object) -> None:
    """`torch.<setter>(value)` now, and the same value whatever the script asks later (its own call is the line the
    lever replaces): set_num_threads, set_float32_matmul_precision."""
    original = getattr(torch, setter)
    original(value)
    _replace(torch, setter, lambda _asked: original(value))


def _replace(owner: object, name: str, value: object) -> None:
    setattr(owner, name, value)


def _matches(lever: Lever, values: dict[str, Any]) -> bool:
    return all(values.get(k) == v for k, v in lever.match.items())


def _dataloader(lever: Lever) -> None:
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler, TensorDataset

    s = lever.settings

    def change(bound: inspect.BoundArguments) -> None:
        a = bound.arguments
        dataset = a.get("dataset")
        if not _matches(lever, {"dataset": type(dataset).__name__, "batch_size": a.get("batch_size", 1)}):
            return  # another loader: as the script made it
        bound.apply_defaults()
        a = bound.arguments  # apply_defaults makes a new dict
        if s.get("batched") and isinstance(dataset, TensorDataset) and a.get("batch_sampler") is None:
            sampler = a.get("sampler") or (RandomSampler(dataset, generator=a.get("generator")) if a.get("shuffle")
                                           else SequentialSampler(dataset))
            a["sampler"] = BatchSampler(sampler, a["batch_size"], bool(a.get("drop_last")))
            a["batch_size"], a["shuffle"], a["drop_last"] = None, None, False
        for name in ("num_workers", "persistent_workers", "pin_memory", "drop_last"):
            if name in s:
                a[name] = s[name]
        if not a.get("num_workers"):
            a["persistent_workers"] = False  # DataLoader refuses it without workers

    _wrap_init(DataLoader, change)


def _optimizer(lever: Lever) -> None:
    kind = lever.match.get("kind")
    cls = getattr(torch.optim, str(kind), None)
    if not isinstance(cls, type) or "fused" not in inspect.signature(cls).parameters:
        raise ValueError(f"torch.optim.{kind} takes no fused=True in this torch")

    def change(bound: inspect.BoundArguments) -> None:
        bound.arguments.update(lever.settings)
        if bound.arguments.get("fused"):
            bound.arguments["foreach"] = None  # torch refuses both

    _wrap_init(cls, change)


def _anomaly_off() -> None:
    original = torch.set_anomaly_enabled
    original(False)

    def off(_mode: bool, check_nan: bool = True) -> None:
        original(False, check_nan)

    # torch.autograd.set_detect_anomaly and detect_anomaly call torch.set_anomaly_enabled(mode, check_nan)
    _replace(torch, "set_anomaly_enabled", off)


def _validate_args_off() -> None:
    from torch.distributions import Distribution

    Distribution.set_default_validate_args(False)
    _replace(Distribution, "set_default_validate_args", staticmethod(lambda _value: None))  # the script's: a no-op

    def change(bound: inspect.BoundArguments) -> None:
        if "validate_args" in bound.arguments:
            bound.arguments["validate_args"] = False

    _wrap_init(Distribution, change)


FRAMEWORK_CLASSES: dict[str, dict[str, tuple[str, str]]] = {
    "lightning": {"Trainer": ("trainer.trainer", "__init__"),
                  "ModelCheckpoint": ("callbacks.model_checkpoint", "__init__")},
    "transformers": {"TrainingArguments": ("training_args", "__post_init__")},
}
"""Per framework, the classes its levers set, with their module (under `lightning.pytorch` and `pytorch_lightning`,
or `transformers`) and the method every construction runs (TrainingArguments: a dataclass whose fields its
__post_init__ checks; the lever's values are set on the object before it)."""
_PACKAGES = {"lightning": ("lightning.pytorch", "pytorch_lightning"), "transformers": ("transformers",)}


def _framework(lever: Lever) -> None:
    by_class: dict[str, dict[str, Any]] = {}
    for key, value in lever.settings.items():
        cls, _, name = key.rpartition(".")
        by_class.setdefault(cls or "TrainingArguments", {})[name] = value
    modules: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for cls, values in by_class.items():
        where, method = FRAMEWORK_CLASSES[lever.kind][cls]
        for package in _PACKAGES[lever.kind]:
            modules[f"{package}.{where}"] = (cls, method, values)

    def then(module: ModuleType) -> None:
        cls_name, method, values = modules[module.__name__]
        cls = getattr(module, cls_name, None)
        if not isinstance(cls, type) or method not in vars(cls):
            return
        if method == "__post_init__":
            original = vars(cls)[method]

            @functools.wraps(original)
            def post_init(self: Any, *args: Any, **kwargs: Any) -> Any:
                for name, value in values.items():
                    setattr(self, name, value)
                return original(self, *args, **kwargs)

            setattr(cls, method, post_init)
        else:
            _wrap_init(cls, lambda bound: _set_keywords(bound, values))

    AfterImport(modules, then).install()


def _set_keywords(bound: inspect.BoundArguments, values: dict[str, Any]) -> None:
    """The lever's values as the constructor's keyword arguments."""
    for name, value in values.items():
        if name not in bound.signature.parameters:
            raise TypeError(f"{bound.signature} takes no {name}= in this release")
        bound.arguments[name] = value


def apply(lever: Lever) -> None:
    """Apply the lever in this process (once, before the script runs)."""
    threads = lever.settings.get("threads")
    if threads is not None:
        _pin("set_num_threads", int(threads))
    if lever.kind == "dataloader":
        _dataloader(lever)
    elif lever.kind == "optimizer":
        _optimizer(lever)
    elif lever.kind == "anomaly_off":
        _anomaly_off()
    elif lever.kind == "validate_args_off":
        _validate_args_off()
    elif lever.kind == "matmul_precision":
        _pin("set_float32_matmul_precision", str(lever.settings["float32_matmul_precision"]))  # "high": TF32
    elif lever.kind in FRAMEWORK_CLASSES:
        _framework(lever)
    elif lever.kind not in ("threads", "malloc", "patch"):  # the environment, the threads above, the patched copy
        raise ValueError(f"unknown lever kind {lever.kind!r}")
