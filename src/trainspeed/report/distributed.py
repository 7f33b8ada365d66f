"""The doctor's section on a run under torchrun: DDP's all-reduce or FSDP's collectives, every rank side by side, and
the predicted scaling."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from trainspeed.units import human_bytes
from trainspeed.watch.dist_result import DistRun


def distributed_lines(d: DistRun) -> list[Table | Text]:
    parts: list[Table | Text] = [sharded_line(d) if d.collectives else all_reduce_line(d)]
    parts += collectives_table(d)
    if len(d.ranks) > 1:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("rank", "host", "median ms", "comm exposed ms", "busy ms"):
            table.add_column(col, justify="left" if col in ("rank", "host") else "right")
        for r in d.ranks:
            busy = (r.median_ms or 0.0) - (r.exposed_ms or 0.0)
            exposed = f"{r.exposed_ms:.3f}" if r.exposed_ms is not None else "-"
            table.add_row(str(r.rank), r.host, f"{r.median_ms or 0:.3f}", exposed, f"{busy:.3f}")
        parts.append(table)
    if d.scaling:
        line = ", ".join(f"{p.world_size}: {p.step_ms:.2f} ms ({p.efficiency:.0%})" for p in d.scaling)
        parts.append(Text(f"predicted step time by world size (ring all-reduce model): {line}", style="dim"))
    parts += [Text(f"note: {n}", style="yellow") for n in d.notes]
    return parts


def _rate(gbs: float) -> str:
    """A bandwidth a reader can check: GB/s, or MB/s below one (a few KiB of gradients move at latency's pace)."""
    return f"{gbs:.2f} GB/s" if gbs >= 1 else f"{gbs * 1e3:.3g} MB/s"


def all_reduce_line(d: DistRun) -> Text:
    comm = (f"all-reduce {d.comm_ms:.3f} ms per step ({d.exposed_ms:.3f} ms exposed, "
            f"{(d.overlap or 0):.0%} hidden behind backward)" if d.comm_ms is not None else "no all-reduce timed")
    bus = f", bus bandwidth {_rate(d.bus_gbs)} (measured)" if d.bus_gbs else ""
    return Text(f"Data-parallel: {d.world_size} ranks ({d.backend or '?'}), {human_bytes(d.grad_bytes)} of "
                f"gradients; {comm}{bus}", style="bold")


def sharded_line(d: DistRun) -> Text:
    f = d.fsdp
    units = ""
    if f is not None:
        units = (f", {f.units} sharding units ({f.resharding} reshard after forward; the largest "
                 f"{max(f.unit_bytes) / 2**20:.2f} MiB unsharded)"
                 + (", hybrid (2-D mesh)" if f.mesh_dims > 1 else "")
                 + (f", parameters in {f.param_dtype}" if f.param_dtype else "")
                 + (", offloaded to the CPU" if f.cpu_offload else ""))
    host = f"; FSDP's own host work {sum(d.fsdp_host_ms.values()):.3f} ms per step (in forward and backward)" \
        if d.fsdp_host_ms else ""
    return Text(f"Sharded (FSDP): {d.world_size} ranks ({d.backend or '?'}){units}{host}", style="bold")


def collectives_table(d: DistRun) -> list[Table]:
    """Per kind of collective: calls, bytes, time in flight and waited, and the part issued in backward."""
    if not d.collectives:
        return []
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("collective", "calls", "MiB", "in flight ms", "waited ms", "backward calls", "backward waited ms"):
        table.add_column(col, justify="left" if col == "collective" else "right", no_wrap=col == "collective")
    for s in d.collectives:
        table.add_row(s.kind.replace("_", "-"), f"{s.calls:.0f}", f"{s.nbytes / 2**20:.2f}", f"{s.comm_ms:.3f}",
                      f"{s.exposed_ms:.3f}", f"{s.backward_calls:.0f}", f"{s.backward_exposed_ms:.3f}")
    return [table]
