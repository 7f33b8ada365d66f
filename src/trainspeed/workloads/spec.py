"""Model specs: `path/to/file.py:factory`, `package.module:factory`, a Hugging Face `config.json` or catalogue
shape (`workloads/hf_config.py`), or a built-in name."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainspeed.errors import UsageError
from trainspeed.names import HF_SHAPES
from trainspeed.workloads.zoo import ZOO, ZooEntry


@dataclass(frozen=True)
class ModelSpec:
    """A resolved spec: the factory, and the built-in input if the spec named a zoo model."""

    text: str
    factory: Callable[[], Any]
    builtin: ZooEntry | None


def _load_file(path: Path) -> Any:
    name = f"_trainspeed_spec_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's file failed on import: say so in one line
        sys.modules.pop(name, None)
        raise UsageError(f"importing {path} raised {type(e).__name__}: {e}") from None
    return module


def resolve_model_spec(text: str) -> ModelSpec:
    """Turn a SPEC into a factory; every failure is a one-line UsageError."""
    if text in ZOO:
        return ModelSpec(text, ZOO[text].factory, ZOO[text])
    if text in HF_SHAPES or text.endswith(".json"):
        from trainspeed.workloads.hf_config import config_spec

        _, entry = config_spec(text)
        return ModelSpec(text, entry.factory, entry)
    if ":" not in text:
        raise UsageError(f"unknown model {text!r}: give FILE.py:FACTORY, MODULE:FACTORY, a Hugging Face "
                         f"config.json, or a built-in name ({', '.join((*ZOO, *HF_SHAPES))})")
    return ModelSpec(text, resolve_callable(text, "factory"), None)


def resolve_callable(text: str, what: str) -> Callable[..., Any]:
    """`FILE.py:NAME` or `MODULE:NAME` as the callable it names (a model's factory, a loss); every failure is a
    one-line UsageError."""
    where, _, attr = text.rpartition(":")
    if not where:
        raise UsageError(f"{text!r}: give FILE.py:NAME or MODULE:NAME")
    if not attr.isidentifier():
        raise UsageError(f"{text!r}: {attr!r} is not a {what} name")
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where)
        if not path.is_file():
            raise UsageError(f"{where}: no such file")
        module = _load_file(path)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise UsageError(f"cannot import module {where!r}: {e}") from None
        except Exception as e:
            raise UsageError(f"importing {where} raised {type(e).__name__}: {e}") from None
    found = getattr(module, attr, None)
    if found is None:
        raise UsageError(f"{where} has no {attr!r}")
    if not callable(found):
        raise UsageError(f"{where}:{attr} is not callable")
    return found
