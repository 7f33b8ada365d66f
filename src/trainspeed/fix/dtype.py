"""slow_dtype's edit: a model and its data in float32 instead of float64. `.double()` becomes `.float()`,
`dtype=torch.float64` (or `torch.double`) becomes `torch.float32`, `.astype(np.float64)` becomes `np.float32`, and a
tensor made from numpy data that is float by its arithmetic (a true division, a float literal) gets `.float()`:
numpy's floats are float64. Integer data (labels) stays as it is."""

from __future__ import annotations

import libcst as cst

from trainspeed.fix.edits import Planned, enclosing
from trainspeed.fix.source import Change, NoPatch, Source

_FLOAT64 = {"torch.float64", "torch.double"}
_NUMPY64 = {"numpy.float64", "numpy.double", "float"}
_MAKERS = {"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor"}


def _floaty(node: cst.CSTNode) -> bool:
    """Whether an expression is float by its own arithmetic: a true division or a float literal in it."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Float) or (isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Divide)):
            return True
        stack.extend(n.children)
    return False


def _dot_float(node: cst.CSTNode) -> cst.CSTNode:
    assert isinstance(node, cst.BaseExpression)
    return cst.Call(cst.Attribute(node, cst.Name("float")))


def float32(source: Source) -> Planned:
    changes: list[Change] = []
    spans: list[tuple[int, int]] = []

    def add(node: cst.CSTNode, make: object) -> None:
        changes.append(Change(node, make))  # type: ignore[arg-type]
        spans.append(source.lines(node))

    for call, name in source.calls():
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "double" and not call.args:
            add(func.attr, lambda n: cst.Name("float"))
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "dtype" and source.qualified(arg.value) in _FLOAT64:
                add(arg.value, lambda n: cst.parse_expression("torch.float32"))
        if isinstance(func, cst.Attribute) and func.attr.value == "astype" and call.args and \
                source.qualified(call.args[0].value) in _NUMPY64:
            add(call.args[0].value, lambda n: cst.parse_expression(
                "np.float32" if "np" in source.imports else "numpy.float32"))
        if name in _MAKERS and call.args and not any(a.keyword and a.keyword.value == "dtype" for a in call.args) \
                and _floaty(call.args[0].value):
            add(call, _dot_float)
    if not changes:
        raise NoPatch("no .double(), dtype=torch.float64 or float numpy data in the script: the float64 comes "
                      "from elsewhere")
    return Planned(changes, enclosing(spans),
                   "float32 in place of float64 (.double() to .float(), float data made .float())", same_arithmetic=False)
