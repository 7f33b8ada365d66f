"""Capture one training step as a flat list of aten ops, and replay it without the per-step Python.

`make_fx` runs one real step (forward, backward, optimizer) and records every aten op it
dispatches: the forward's, the ones the autograd engine runs for backward, and the optimizer's
in-place updates of the state tensors handed in as inputs. Replaying that list under no_grad runs
the same kernels, in the same order, on the same tensors: the same numbers bit for bit, without
module calls, autograd bookkeeping, the autograd engine or the optimizer's Python. It is the CPU's
counterpart of a CUDA graph, and the starting point of the compiled path.

A step that reads a tensor's value on the host (`.item()`, `bool(t)`, a data-dependent branch)
cannot be captured: the value read during capture would be frozen into the replay. Such steps
are refused with the reason.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx

_aten = torch.ops.aten
HOST_READS = frozenset({_aten._local_scalar_dense.default, _aten.is_nonzero.default, _aten.item.default})
"""Ops whose result is a Python number: what a replay would freeze."""
_DROPPED = frozenset({_aten.detach.default, _aten.alias.default})
"""Ops that only matter to autograd: identities in a no_grad replay."""
_BINDINGS = {
    _aten.mm.default: torch.mm, _aten.addmm.default: torch.addmm, _aten.t.default: torch.t,
    _aten.relu.default: torch.relu, _aten.linear.default: torch._C._nn.linear, _aten.sum.dim_IntList: torch.sum,
    _aten.add.Tensor: torch.add, _aten.add_.Tensor: torch.Tensor.add_, _aten.mul.Tensor: torch.mul,
    _aten.view.default: torch.Tensor.view, _aten._log_softmax.default: torch._log_softmax,
    _aten._log_softmax_backward_data.default: torch._log_softmax_backward_data,
}
"""Ops whose Python binding resolves to exactly that overload and parses its arguments faster."""
_FILLS = {_aten.ones_like.default: torch.ones, _aten.zeros_like.default: torch.zeros}


class CaptureRefused(Exception):
    """The step cannot be replayed faithfully; the message says why."""


@dataclass
class CapturedStep:
    """One captured step: `replay(*inputs)` does what the step did, on the same input tensors."""

    graph_module: torch.fx.GraphModule
    """The pruned aten graph (inputs: the state tensors, then the batch tensors)."""
    replay: Callable[..., torch.Tensor]
    """Runs the step's ops directly; call it under torch.no_grad()."""
    ops: int
    """Aten ops per replayed step (views included)."""
    capture_seconds: float
    """Wall time of the capture, which also ran one real training step."""
    source: str
    """The generated replay function, for inspection."""


def capture_step(step: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor]) -> CapturedStep:
    """Run `step(*inputs)` once for real while recording it; refuse steps a replay would get wrong.

    `step` must reach every tensor it updates through `inputs` (parameters, buffers, optimizer
    state) and return the step's loss. It runs for real: its effect is one training step.
    """
    start = time.perf_counter()
    try:
        graph_module = make_fx(step, tracing_mode="real")(*inputs)
    except RuntimeError as e:  # make_fx itself stops at a host read of a traced tensor
        if "_local_scalar_dense" in str(e) or "value out of a tracing tensor" in str(e):
            raise CaptureRefused(_host_read_reason("aten._local_scalar_dense.default")) from None
        raise
    reads = sorted({str(n.target) for n in graph_module.graph.nodes if n.target in HOST_READS})
    if reads:
        raise CaptureRefused(_host_read_reason(", ".join(reads)))
    _prune(graph_module)
    _simplify(graph_module)
    replay, source = _direct_calls(graph_module)
    ops = sum(1 for n in graph_module.graph.nodes if n.op == "call_function" and n.target is not operator.getitem)
    return CapturedStep(graph_module, replay, ops, time.perf_counter() - start, source)


def _host_read_reason(ops: str) -> str:
    return (f"the step reads tensor values on the host ({ops}: .item(), a branch on a tensor, or an optimizer "
            "that keeps its step count on the host, like Adam; Adam(..., fused=True) keeps it on the device); a "
            "replay would freeze the value read during capture")


def _prune(graph_module: torch.fx.GraphModule) -> None:
    """Drop autograd-only identities and profiler markers; fold t(t(x)) into x."""
    graph = graph_module.graph
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in _DROPPED:
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
        elif node.target is _aten.t.default:
            source = node.args[0]
            if isinstance(source, torch.fx.Node) and source.target is _aten.t.default:
                node.replace_all_uses_with(source.args[0])
                graph.erase_node(node)
    for node in reversed(list(graph.nodes)):
        namespace = getattr(node.target, "namespace", "")
        if node.op == "call_function" and namespace == "profiler" and not node.users:
            graph.erase_node(node)
    graph.eliminate_dead_code()  # keeps in-place ops: they are impure
    graph_module.recompile()


def _val(node: object) -> torch.Tensor | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _writes(node: torch.fx.Node) -> bool:
    """Whether this op may write into one of its arguments."""
    schema = getattr(node.target, "_schema", None)
    return schema is None or any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def _simplify(graph_module: torch.fx.GraphModule) -> None:
    """Fewer ops, same kernels, same numbers.

    - addmm(b, x, t(W)) with that t used once -> linear(x, W, b): aten::linear on a 2-d input
      with a bias *is* addmm(b, x, W.t()), called from C++;
    - view(sum(x, dims, keepdim=True), shape) -> sum(x, dims), when shape drops exactly those dims;
    - ones_like / zeros_like of a value whose users never write to it -> one tensor made at capture.
    """
    graph = graph_module.graph
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is _aten.addmm.default and not node.kwargs and len(node.args) == 3:
            bias, x, weight_t = node.args
            x_val = _val(x)
            if (isinstance(weight_t, torch.fx.Node) and weight_t.target is _aten.t.default
                    and len(weight_t.users) == 1 and x_val is not None and x_val.dim() == 2 and x_val.device.type == "cpu"):
                node.target = _aten.linear.default
                node.args = (x, weight_t.args[0], bias)
                graph.erase_node(weight_t)
        elif node.target is _aten.view.default:
            source = node.args[0]
            if (isinstance(source, torch.fx.Node) and source.target is _aten.sum.dim_IntList and len(source.users) == 1
                    and len(source.args) == 3 and source.args[2] is True and not source.kwargs):
                summed = _val(source.args[0])
                if summed is not None:
                    summed_dims: Any = source.args[1]  # sum.dim_IntList's dims: a list of ints
                    dims = {d % summed.dim() for d in summed_dims}
                    kept = [n for i, n in enumerate(summed.shape) if i not in dims]
                    if list(node.args[1]) == kept:
                        source.args = (source.args[0], source.args[1], False)
                        node.replace_all_uses_with(source)
                        graph.erase_node(node)
        elif node.target in _FILLS and set(node.kwargs) <= {"pin_memory", "memory_format"}:
            value = _val(node)
            if value is not None and not any(_writes(u) or u.op == "output" for u in node.users):
                name = f"_fill_{node.name}"
                graph_module.register_buffer(name, _FILLS[node.target](value.shape, dtype=value.dtype, device=value.device))
                with graph.inserting_before(node):
                    constant = graph.get_attr(name)
                node.replace_all_uses_with(constant)
                graph.erase_node(node)
    graph.eliminate_dead_code()
    graph_module.recompile()


def _direct_calls(graph_module: torch.fx.GraphModule) -> tuple[Callable[..., torch.Tensor], str]:
    """Generate a function that calls each op's C++ entry point in graph order.

    fx's own generated code goes through OpOverload.__call__ for every op, about a microsecond
    more per op than the C++ callable it wraps; at tens of ops per step that is a large share of
    a small model's step.
    """
    names: dict[torch.fx.Node, str] = {}
    constants: dict[str, object] = {}
    params: list[str] = []
    body: list[str] = []

    def ref(value: object) -> str:
        if isinstance(value, torch.fx.Node):
            return names[value]
        if isinstance(value, (list, tuple)):
            inner = ", ".join(ref(v) for v in value)
            return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
        if value is None or isinstance(value, (bool, int, str)) or isinstance(value, float) and math.isfinite(value):
            return repr(value)
        name = f"c{len(constants)}"
        constants[name] = value
        return name

    for i, node in enumerate(graph_module.graph.nodes):
        if node.op == "placeholder":
            names[node] = f"a{len(params)}"
            params.append(names[node])
        elif node.op == "get_attr":
            names[node] = ref(getattr(graph_module, node.target))
        elif node.op == "call_function":
            names[node] = f"v{i}"
            if node.target is operator.getitem:
                body.append(f"    v{i} = {ref(node.args[0])}[{node.args[1]!r}]")
                continue
            fn = ref(_BINDINGS.get(node.target) or getattr(node.target, "_op", node.target))
            args = [ref(a) for a in node.args] + [f"{k}={ref(v)}" for k, v in node.kwargs.items()]
            body.append(f"    v{i} = {fn}({', '.join(args)})")
        elif node.op == "output":
            body.append(f"    return {ref(node.args[0])}")
        else:
            raise CaptureRefused(f"unexpected graph node {node.op} {node.target}")
    source = f"def replay({', '.join(params)}):\n" + "\n".join(body) + "\n"
    namespace: dict[str, object] = dict(constants)
    exec(compile(source, "<trainspeed captured step>", "exec"), namespace)  # noqa: S102 - our own generated code
    return namespace["replay"], source  # type: ignore[return-value]
