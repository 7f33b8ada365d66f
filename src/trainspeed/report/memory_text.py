"""The memory estimate's terminal view (rich): the peak and its parts, the batch that fits, the fewest ranks, the
measured peak, the layers. One function per section (`memory_view`)."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from trainspeed.memory.result import CATEGORIES, BatchSearch, MemoryEstimate, MemoryReport
from trainspeed.units import human_bytes

MAX_LAYER_ROWS = 40

Parts = list[RenderableType]


def memory_view(report: MemoryReport) -> Group:
    """The `trainspeed memory` screen: the peak, its parts, the batch that fits, the layers."""
    est, search = report.estimate, report.search
    parts: Parts = []
    if est is not None:
        parts += _peak(report, est)
    if search is not None:
        parts += _largest_batch(search, est)
        if report.fewest_ranks is not None:
            parts.append(_fewest_ranks(report, search))
    parts += _measured(report)
    if est is not None and est.layers:
        parts += _layers(est)
    notes = report.notes + (est.notes if est else [])
    parts += [Text(f"note: {n}", style="yellow") for n in notes]
    return Group(*parts)


def _peak(report: MemoryReport, est: MemoryEstimate) -> Parts:
    """The model and its settings, the predicted peak, its fixed and per-sample parts, and what is live at the peak."""
    shape = "x".join(str(d) for d in report.input_shape)
    amp = est.amp or (f"{est.fsdp_param_dtype} in FSDP2's units" if est.fsdp_param_dtype else "fp32")
    ckpt = ", checkpointing" if est.checkpointing else ""
    of = f" of {shape} {report.input_dtype}".rstrip() if shape or report.input_dtype else ""  # a bare estimate: none
    parts: Parts = [Text(f"{report.model}: {est.param_count:,} parameters; batch {report.batch_size}{of}; "
                         f"{est.optimizer}, {amp}{ckpt}; target {est.device}", style="bold")]
    mixed = (f", {est.fsdp_param_dtype} parameters" if est.fsdp_param_dtype else "") + \
        (", CPU offload: the device's peak" if est.cpu_offload else "")
    whose = (f"one rank's steady-state training step (the busiest of {est.world_size}, {est.shard}{mixed}; "
             f"batch {report.batch_size} per rank)" if est.shard else "a steady-state training step")
    parts.append(Text(f"Peak of {whose} (predicted): {human_bytes(est.total_bytes)} "
                      f"({est.total_bytes:,} bytes), reached in {est.peak_phase}"))
    parts.append(Text(f"  = fixed {human_bytes(est.fixed_bytes)} + batch x {human_bytes(est.per_sample_bytes)} per sample"))
    parts.append(Text("  live at the peak: " + ", ".join(
        f"{c} {human_bytes(est.breakdown[c])}" for c in CATEGORIES if est.breakdown.get(c))))
    if est.host_bytes is not None:
        parts.append(Text(f"  in host memory (CPU offload): {human_bytes(est.host_bytes)} at most, the rank's shards "
                          "of the parameters, their gradients and the optimizer's state and step"))
    return parts


def _largest_batch(search: BatchSearch, est: MemoryEstimate | None) -> Parts:
    """The largest batch under the budget, and each trial batch measured."""
    budget = f"{human_bytes(search.budget_bytes)} with a {search.margin:.0%} margin"
    if search.max_batch is None:
        return [Text(f"Largest batch under {budget}: none - not even a batch of 1 fits", style="red")]
    how = "measured and confirmed" if search.confirmed else "measured" if search.trials else "predicted"
    peak = f" (peak {human_bytes(search.predicted_bytes)} predicted)" if search.predicted_bytes else ""
    per_rank = " per rank" if est is not None and est.shard else ""
    parts: Parts = [Text(f"Largest batch{per_rank} under {budget}: {search.max_batch:,}{peak}, {how}", style="green")]
    for b, ok, peak_b in search.trials:
        verdict = "fits" if ok else ("out of memory" if peak_b is None else "over budget")
        parts.append(Text(f"  trial batch {b:,}: {verdict}" + (f", measured {human_bytes(peak_b)}" if peak_b else ""),
                          style="dim"))
    return parts


def _fewest_ranks(report: MemoryReport, search: BatchSearch) -> Table:
    """Per way of sharding, the fewest ranks whose busiest fits the budget."""
    table = Table(title=f"The fewest ranks of {human_bytes(search.budget_bytes)} ({search.margin:.0%} kept free) "
                        f"for a batch of {report.batch_size} per rank (predicted)", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for col in ("shard", "ranks", "busiest rank's peak"):
        table.add_column(col, justify="left" if col == "shard" else "right")
    for fit in report.fewest_ranks or []:
        table.add_row(fit.shard, f"{fit.ranks:,}" if fit.ranks is not None else
                      "none fits" if fit.confirmed else "none found",
                      human_bytes(fit.peak_bytes) if fit.peak_bytes is not None else "-")
    return table


def _measured(report: MemoryReport) -> Parts:
    """The peak of a real step, and the estimate's error against it."""
    measured = report.measured
    if measured is None:
        return []
    err = f"; the estimate is off by {report.error_pct:+.2f}%" if report.error_pct is not None else ""
    return [Text(f"Measured on {measured.device}: {human_bytes(measured.peak_bytes)} "
                 f"({measured.peak_bytes:,} bytes, {measured.method}){err}")]


def _layers(est: MemoryEstimate) -> Parts:
    """One row per module call: its output's shape, its parameters, what it saved for backward."""
    table = Table(title="Per layer (one row per call)", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("layer", "type", "output shape", "params", "saved for backward"):
        table.add_column(col, justify="right" if col in ("params", "saved for backward") else "left")
    for row in est.layers[:MAX_LAYER_ROWS]:
        out_shape = "x".join(str(d) for d in row.output_shape) if row.output_shape else "-"
        table.add_row(row.name, row.kind, out_shape, f"{row.params:,}", human_bytes(row.saved_bytes))
    parts: Parts = [table]
    if len(est.layers) > MAX_LAYER_ROWS:
        parts.append(Text(f"... {len(est.layers) - MAX_LAYER_ROWS} more rows in --json", style="dim"))
    return parts
