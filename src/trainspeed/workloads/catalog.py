"""Built-in workloads for `trainspeed sweep`, and the resolver of `--workload SPEC`.

SPEC is a built-in name, optionally with size parameters (`mlp:width=1024,batch=256`), or
`file.py:factory` / `module:factory` returning a `trainspeed.Workload`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from trainspeed.errors import UsageError
from trainspeed.workloads.digits import AugmentedDigits, DigitsCNN32, digits_tensors
from trainspeed.workloads.iris import load_iris_split, make_iris_mlp
from trainspeed.workloads.synthetic import (
    TokenLoss,
    classification_data,
    cnn_model,
    mlp_model,
    seeded,
    token_data,
    transformer_model,
)
from trainspeed.workloads.workload import Workload
from trainspeed.workloads.zoo import DigitsCNN


def _iris(p: dict[str, int]) -> Workload:
    def data() -> tuple[torch.Tensor, ...]:
        split = load_iris_split()
        return split.x_train, split.y_train

    return Workload("iris", make_iris_mlp, data, batch_size=None, params=p,
                    description="the seed's Iris MLP 4-10-3, full batch of 120, SGD lr=0.01")


def _adam(params: Any) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=1e-3)


def _digits_cnn(p: dict[str, int]) -> Workload:
    return Workload("digits-cnn", partial(seeded, 0, DigitsCNN), digits_tensors, optimizer=_adam,
                    batch_size=p["batch"], params=p, description="a CNN on the 1797 8x8 digits, Adam")


def _digits_aug(p: dict[str, int]) -> Workload:
    return Workload("digits-aug", partial(seeded, 0, partial(DigitsCNN32, p["width"])), AugmentedDigits,
                    optimizer=_adam, batch_size=p["batch"], params=p,
                    description="digits decoded from PNG and augmented per item (rotate, crop, resize), "
                                "a 32x32 CNN, Adam")


def _mlp(p: dict[str, int]) -> Workload:
    features, classes = p["features"], 10
    return Workload("mlp", partial(seeded, 0, partial(mlp_model, features, p["width"], p["depth"], classes)),
                    partial(classification_data, p["samples"], (features,), classes), batch_size=p["batch"],
                    params=p, description=f"an MLP {features}-" + "-".join([str(p['width'])] * p["depth"])
                    + f"-{classes} on random data, SGD")


def _cnn(p: dict[str, int]) -> Workload:
    return Workload("cnn", partial(seeded, 0, partial(cnn_model, p["width"], 10)),
                    partial(classification_data, p["samples"], (3, p["size"], p["size"]), 10),
                    batch_size=p["batch"], params=p,
                    description=f"a small ResNet (width {p['width']}) on random 3x{p['size']}x{p['size']} images, SGD")


def _transformer(p: dict[str, int]) -> Workload:
    return Workload("transformer",
                    partial(seeded, 0, partial(transformer_model, p["vocab"], p["context"], p["width"], p["layers"])),
                    partial(token_data, p["samples"], p["context"], p["vocab"]), loss=TokenLoss, optimizer=_adam,
                    batch_size=p["batch"], params=p,
                    description=f"a GPT-style decoder ({p['layers']} layers, width {p['width']}, context "
                                f"{p['context']}) on random tokens, Adam")


@dataclass(frozen=True)
class Builtin:
    build: Callable[[dict[str, int]], Workload]
    defaults: dict[str, int]
    summary: str


BUILTINS: dict[str, Builtin] = {
    "iris": Builtin(_iris, {}, "the seed's Iris MLP, full batch"),
    "digits-cnn": Builtin(_digits_cnn, {"batch": 64}, "CNN on 8x8 digits held as tensors"),
    "digits-aug": Builtin(_digits_aug, {"batch": 64, "width": 16},
                          "digits decoded and augmented per item (a Dataset with real per-item work)"),
    "mlp": Builtin(_mlp, {"width": 512, "depth": 2, "batch": 128, "features": 64, "samples": 4096},
                   "sized synthetic MLP"),
    "cnn": Builtin(_cnn, {"width": 16, "batch": 32, "size": 32, "samples": 512}, "sized synthetic ResNet-style CNN"),
    "transformer": Builtin(_transformer, {"width": 64, "layers": 2, "context": 64, "vocab": 512, "batch": 16,
                                          "samples": 512}, "sized synthetic GPT-style transformer"),
}


def _params(name: str, text: str) -> dict[str, int]:
    allowed = BUILTINS[name].defaults
    params = dict(allowed)
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, eq, raw = item.partition("=")
        if not eq:
            raise UsageError(f"workload {name}: expected KEY=VALUE, got {item!r}")
        if key not in allowed:
            keys = ", ".join(allowed) or "none"
            raise UsageError(f"workload {name}: unknown parameter {key!r} (it takes: {keys})")
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            raise UsageError(f"workload {name}: {key} must be a positive integer, got {raw!r}")
        params[key] = value
    return params


def builtin_workload(name: str, **params: int) -> Workload:
    """A built-in workload with some size parameters changed (unknown names: UsageError)."""
    text = ",".join(f"{k}={v}" for k, v in params.items())
    return BUILTINS[name].build(_params(name, text))


def resolve_workload(text: str) -> Workload:
    """`--workload SPEC` -> a Workload; every failure is a one-line UsageError."""
    name, _, rest = text.partition(":")
    if name in BUILTINS:
        return BUILTINS[name].build(_params(name, rest))
    if ":" not in text:
        raise UsageError(f"unknown workload {text!r}: give a built-in ({', '.join(BUILTINS)}) or "
                         "FILE.py:FACTORY returning a trainspeed.Workload")
    from trainspeed.workloads.spec import resolve_model_spec

    factory = resolve_model_spec(text).factory
    try:
        made = factory()
    except Exception as e:
        raise UsageError(f"{text}: the factory raised {type(e).__name__}: {e}") from None
    if not isinstance(made, Workload):
        raise UsageError(f"{text}: the factory returned {type(made).__name__}; a sweep needs a trainspeed.Workload "
                         "(model, data, loss and optimizer factories)")
    return made
