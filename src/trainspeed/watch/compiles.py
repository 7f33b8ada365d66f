"""torch.compile's compilations, from dynamo's own table of compile times (`torch._dynamo.utils.
compilation_time_metrics`), read at the two ends of the measured steps. Nothing is imported or registered: a script
that never compiles never loads dynamo, and one that does fills the table whether watched or not.

A graph's compile (`_compile.compile_inner`: dynamo's tracing, AOT autograd and the forward's code) is one entry;
its backward is compiled inside it, or at the graph's first backward (`backward._backward_impl`, outside it). A
compile after the first steps is a recompile: an input of a shape the compiled code does not take (the last, smaller
batch of an epoch; a new sequence length), or another guard that failed.
"""

from __future__ import annotations

import sys

GRAPH_KEY = "_compile.compile_inner"
LAZY_BACKWARD_KEY = "backward._backward_impl"


def compiled_so_far() -> tuple[int, float]:
    """(graphs compiled, seconds spent compiling them) in this process so far; (0, 0.0) where dynamo never ran or
    keeps no such table (an older torch)."""
    table = getattr(sys.modules.get("torch._dynamo.utils"), "compilation_time_metrics", None)
    if not isinstance(table, dict):
        return 0, 0.0
    graphs = list(table.get(GRAPH_KEY, ()))
    return len(graphs), float(sum(graphs) + sum(table.get(LAZY_BACKWARD_KEY, ())))
