"""K training steps per call, compiled by TorchInductor from the captured step.

The captured step mutates its inputs (parameters, optimizer state). Calling it K times inside a
function traced with `functionalize` on fake tensors gives one pure graph of K steps (nothing runs
while tracing), which `torch.compile` turns into one C++ function (`cpp_wrapper`: no Python
between kernels). The first call compiles; Inductor keeps what it built in its on-disk cache, so a
later run of the same step compiles in a fraction of the time. Measured compile and step times
are kept per step signature in `compile_times.json`, to predict whether compiling pays next time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from trainspeed._io import write_atomic
from trainspeed.loop.capture import CapturedStep

STEPS_PER_CALL = 16
"""K: 16 steps per call measured 35 µs/step on the seed's step (8: 43 µs; 32: 28 µs but twice the compile)."""


def step_key(captured: CapturedStep, inputs: Sequence[torch.Tensor], k: int) -> str:
    """Identifies a compiled function: the step's ops, the input shapes, K, torch and the CPU."""
    shapes = ";".join(f"{tuple(t.shape)}:{t.dtype}:{t.device.type}" for t in inputs)
    text = "\n".join([captured.graph_module.code, shapes, str(k), torch.__version__, str(torch.get_num_threads())])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def load_times(cache_dir: Path, key: str) -> dict[str, float] | None:
    try:
        record = json.loads((cache_dir / "compile_times.json").read_text())
    except (OSError, ValueError):
        return None
    entry = record.get(key)
    return entry if isinstance(entry, dict) else None


_COMPILED_HERE: set[str] = set()
"""Keys compiled in this process: a second compile in the same process reuses in-memory caches and
would understate what a new process pays, so only the first one is remembered."""


def save_times(cache_dir: Path, key: str, compile_s: float, step_s: float) -> None:
    """Remember this compile: the first one of a key as cold, later ones (in new processes) as warm."""
    if key in _COMPILED_HERE:
        return
    _COMPILED_HERE.add(key)
    path = cache_dir / "compile_times.json"
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            record = {}
        entry = record.get(key) if isinstance(record.get(key), dict) else None
        if entry is None:
            entry = {"cold_s": compile_s}
        else:
            entry["warm_s"] = compile_s
        entry["step_s"] = step_s
        record[key] = entry
        write_atomic(path, json.dumps(record, indent=1, sort_keys=True))
    except OSError:
        pass  # a cache we cannot write only costs a prediction next time


def spell_out_alpha(graph_module: torch.fx.GraphModule) -> None:
    """Rewrite add/sub(x, y, alpha=a) as add/sub(x, y * a).

    Inductor's add + mm -> addmm fusion (torch 2.13) drops `alpha`, so an SGD update
    `p.add_(grad, alpha=-lr)` whose grad is an mm would be compiled as `p + grad`; the same family
    of bug as pytorch/pytorch#167313. Spelling the product out keeps the pattern from matching.
    """
    aten = torch.ops.aten
    graph = graph_module.graph
    for node in list(graph.nodes):
        if node.target in (aten.add.Tensor, aten.sub.Tensor) and node.kwargs.get("alpha", 1) != 1:
            with graph.inserting_before(node):
                scaled = graph.call_function(aten.mul.Tensor, (node.args[1], node.kwargs["alpha"]))
            node.args = (node.args[0], scaled)
            node.kwargs = {k: v for k, v in node.kwargs.items() if k != "alpha"}
    graph_module.recompile()


def build_k_steps(captured: CapturedStep, n_state: int, batch_inputs: int, k: int) -> Callable[..., torch.Tensor]:
    """A compiled function of (state..., batch_1..., ..., batch_k...) running k steps; returns the k losses.

    Compilation happens on the first call.
    """
    graph_module = captured.graph_module

    def k_steps(*args: torch.Tensor) -> torch.Tensor:
        state = args[:n_state]
        losses = []
        for i in range(k):
            batch = args[n_state + i * batch_inputs: n_state + (i + 1) * batch_inputs]
            losses.append(graph_module(*state, *batch))
        return torch.stack(losses)

    def trace(*args: torch.Tensor) -> torch.fx.GraphModule:
        with torch.no_grad():
            return make_fx(torch.func.functionalize(k_steps, remove="mutations_and_views"),
                           tracing_mode="fake", _allow_non_fake_inputs=True)(*args)

    compiled: list[Callable[..., torch.Tensor]] = []

    def call(*args: torch.Tensor) -> torch.Tensor:
        if not compiled:
            pure = trace(*args)
            spell_out_alpha(pure)
            compiled.append(torch.compile(pure, fullgraph=True, dynamic=False, options={"cpp_wrapper": True}))
        with torch.no_grad():
            return compiled[0](*args)

    return call
