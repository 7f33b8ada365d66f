"""Terminal views (rich) of result objects."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from trainspeed.demo.result import DemoResult
from trainspeed.diagnose.compare import Comparison
from trainspeed.diagnose.report import DoctorReport
from trainspeed.diagnose.rules.brief import plural
from trainspeed.hardware.cpu import CpuInfo
from trainspeed.hardware.cpu_generations import TRAINING_FEATURES, contradicted_by_isa, from_cpuid
from trainspeed.hardware.gpu import GpuInfo
from trainspeed.hardware.report import HardwareReport
from trainspeed.report.doctor_brief import verdict_lines
from trainspeed.report.fitted import Fitted
from trainspeed.sweep.result import SweepResult
from trainspeed.units import gib, human_bytes

_SOURCE_WORDS = {"model name": "from the model name", "cpuid": "from CPUID family/model",
                 "isa flags": "a lower bound from the ISA flags",
                 "isa flags, not cpuid": "a lower bound from the ISA flags"}


def _cpuid_overruled(cpu: CpuInfo) -> str:
    """Why the ISA overruled the CPUID model, where it did ("": it did not)."""
    if cpu.microarchitecture_source != "isa flags, not cpuid":
        return ""
    named = from_cpuid(cpu.vendor, cpu.family, cpu.model_number, cpu.stepping)
    flag = contradicted_by_isa(cpu.vendor, named or "", cpu.flags) if named else None
    has = dict(TRAINING_FEATURES).get(flag or "", flag)
    return (f" (CPUID family {cpu.family} model {cpu.model_number} names {named}, which has no {has}: a model a "
            "virtual machine reports, the ISA is the host's)")


def cpu_lines(cpu: CpuInfo) -> list[str]:
    """What matters about the CPU for training, a fact a line."""
    arch = cpu.microarchitecture or "generation unknown"
    where = _SOURCE_WORDS.get(cpu.microarchitecture_source or "", "")
    lines = [f"{cpu.model} ({cpu.vendor}): {arch}" + (f", {where}" if where else "") + _cpuid_overruled(cpu)]
    lines.append(f"{cpu.physical_cores or '?'} physical cores, {cpu.logical_threads or '?'} threads; "
                 f"torch uses {cpu.torch_threads} intra-op threads")
    feats = cpu.features
    lines.append("ISA: " + (", ".join(feats) if feats else "none of AVX2/AVX-512/AMX")
                 + ("; native bf16 matmuls" if cpu.native_bf16 else "; no native bf16 (CPU autocast to bf16 is slow here)"))
    lines.append(f"RAM {gib(cpu.ram_total_bytes)} total, {gib(cpu.ram_available_bytes)} available")
    return lines


def gpu_line(g: GpuInfo) -> str:
    """One line on a GPU: tier, generation, VRAM, bf16 - what decides what it can train."""
    p = g.product
    if p.line.startswith("GeForce") and p.tier is not None:
        kind = f"{p.line} tier {p.tier}" + (f" {p.suffix}" if p.suffix else "") + f", generation {p.generation}"
    else:
        kind = f"{p.line} {p.model}" + (f" {p.form_factor}" if p.form_factor else "")
    if p.mobile:
        kind += " (laptop)"
    arch = g.architecture or "architecture unknown"
    cc = f" (sm_{g.compute_capability.replace('.', '')})" if g.compute_capability else ""
    vram = f"{gib(g.vram_total_bytes)} VRAM ({gib(g.vram_free_bytes)} free)"
    bf16 = {True: "bf16 yes", False: "bf16 no", None: "bf16 ?"}[g.bf16]
    peak = g.peak_tflops
    rates = []
    if peak.bf16:
        rates.append(f"{peak.bf16:g} TFLOP/s bf16")
    if peak.fp32:
        rates.append(f"{peak.fp32:g} TFLOP/s fp32")
    if g.memory_bandwidth_gbs:
        rates.append(f"{g.memory_bandwidth_gbs:g} GB/s")
    peaks = ("peak (dense, spec sheet): " + ", ".join(rates)) if rates else f"peaks: '{g.spec_key}' not in our table"
    link = f"PCIe gen{g.pcie.generation} x{g.pcie.width}" if g.pcie.generation else "PCIe link unknown"
    usable = "" if g.torch_usable else " - NOT usable by this PyTorch build"
    return (f"GPU {g.index}: {g.name}: {kind}, {arch}{cc}; {vram}; {bf16}; "
            f"{g.sm_count or '?'} SMs; {peaks}; {link}; driver {g.driver or '?'}, CUDA {g.cuda or '?'}{usable}")


def hardware_view(report: HardwareReport) -> Group:
    """The `trainspeed hw` screen."""
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for i, line in enumerate(cpu_lines(report.cpu)):
        table.add_row("CPU" if i == 0 else "", line)
    if report.gpu.gpus:
        for g in report.gpu.gpus:
            table.add_row("GPU", gpu_line(g))
    else:
        table.add_row("GPU", "none")
    parts: list[Table | Text] = [table]
    if report.gpu.note:
        parts.append(Text(report.gpu.note, style="yellow"))
    parts.append(Text(f"torch {report.torch_version}, Python {report.python_version}, {report.os}", style="dim"))
    return Group(*parts)


def demo_view(result: DemoResult, folder: str | None = None, doctor: dict[str, DoctorReport] | None = None) -> Group:
    """The `trainspeed demo` screen: the runs' table, then what they show."""
    table = Table(title=f"The seed's Iris MLP, {result.epochs} full-batch epochs (torch threads: {result.torch_threads})",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("device", "variant", "seconds", "us/epoch", "reads", "final loss", "accuracy"):
        table.add_column(col, justify="left" if col in ("device", "variant") else "right", no_wrap=True)
    for r in result.runs:
        variant = r.variant if r.threads is None else f"{r.variant} ({plural(r.threads, 'thread')})"
        table.add_row(r.device, variant, f"{r.seconds:.3f}", f"{r.us_per_epoch:.1f}", str(r.syncs),
                      f"{r.final_loss:.6f}", f"{r.test_accuracy:.1%}")
    parts: list[Table | Text] = [
        table, Text("reads: host reads of tensor values (.item(), print, ...), each a sync on a GPU", style="dim"),
        Text("What the numbers say (measured):", style="bold"),
    ]
    parts += [Text(f"- {line}") for line in result.explanation]
    for device, rep in (doctor or {}).items():
        step = f"{rep.watch.steps.median_ms:.3f} ms" if rep.watch.steps.median_ms is not None else "?"
        parts.append(Text(f"The doctor on the seed's loop, {device.upper()} ({rep.watch.steps.seen} steps watched, "
                          f"median {step} per step):", style="bold"))
        for i, v in enumerate(rep.verdicts, 1):
            parts += [Text(line) for line in verdict_lines(v, i)]
    if folder:
        parts.append(Text(f"Wrote {folder}", style="dim"))
    return Group(*parts)


_SWEEP_EXTRAS = (("samples_per_s", "samples/s", "{:,.0f}"), ("peak_bytes", "peak", None),
                 ("records", "records", "{:.0f}"), ("read_us", "us/read", "{:.1f}"),
                 ("cost_per_record_us", "us/record", "{:.1f}"), ("saves", "saves", "{:.0f}"),
                 ("ms_per_save", "ms/save", "{:.1f}"),
                 ("speedup", "x one rank", "{:.2f}"), ("efficiency", "efficiency", "{:.0%}"),
                 ("vs_as_run", "x as run", "{:.2f}"),
                 ("allreduce_ms", "all-reduce ms", "{:.3f}"), ("bus_gbs", "bus GB/s", "{:.2f}"))


def sweep_view(result: SweepResult) -> Group:
    """The `trainspeed sweep` screen: one row per value, the findings, the advice."""
    if result.device == "script":
        upto = result.findings.get("script_steps")
        runs = f"runs of the script to step {upto}" if upto else "whole runs of the script"
        title = f"{result.knob} on {result.workload} ({runs}, {result.repeats} rounds alternated)"
    else:
        title = (f"{result.knob} on {result.workload} ({result.device}; {result.steps} steps per trial, "
                 f"{result.repeats} repeats interleaved)")
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    extras = [e for e in _SWEEP_EXTRAS if any(e[0] in p.extras for p in result.points)]
    for col in ["value", "ms/step", "95% interval"] + [e[1] for e in extras] + [""]:
        table.add_column(col, justify="left" if col in ("value", "") else "right")
    for p in result.points:
        if not p.ok:
            table.add_row(p.value, "-", "-", *(["-"] * len(extras)), Text(f"failed: {p.error}", style="red"))
            continue
        per = 1e3 / result.steps
        low, high = p.interval
        interval = "predicted" if p.predicted else f"{low * per:.3f}-{high * per:.3f}"
        cells = []
        for key, _, fmt in extras:
            v = p.extras.get(key)
            cells.append("-" if v is None else human_bytes(v) if fmt is None else fmt.format(v))
        mark = "best" if p.value == result.best else "~ best" if p.value in result.same_as_best else ""
        style = "dim italic" if p.predicted else None
        table.add_row(p.value, f"{p.seconds * per:.3f}", interval, *cells,
                      mark, style=style)
    parts: list[Table | Text] = [table]
    if result.same_as_best:
        parts.append(Text("~ best: its 95% interval overlaps the best one's (no measurable difference)", style="dim"))
    fit = result.findings.get("fit")
    if fit:
        sign = "-" if fit["b"] < 0 else "+"
        parts.append(Text(f"fit: seconds = {fit['a']:.4f} {sign} {abs(fit['b']) * 1e6:.2f} us x records "
                          f"(R^2 {fit['r2']:.3f})"))
    if result.findings.get("why"):
        parts.append(Text(result.findings["why"]))
    if result.findings.get("knee"):
        parts.append(Text(f"knee: {result.findings['knee']} (the first value within 10% of the best)"))
    fit_batch = result.findings.get("largest_fit")
    if fit_batch and fit_batch.get("batch"):
        parts.append(Text(f"largest batch predicted to fit in {human_bytes(fit_batch['budget_bytes'])} with a 10% margin: "
                          f"{fit_batch['batch']:,} (trainspeed memory's estimate)"))
    if "compile_s" in result.findings:
        even = result.findings.get("break_even_steps")
        parts.append(Text(f"compile time {result.findings['compile_s']:.2f} s (the first step, apart from the trials); "
                          + (f"break-even after {even:,} steps" if even else "it never pays back here")))
    grid = result.findings.get("grid")
    if grid:
        g = Table(title="step ms, cpu / cuda" + (" (cuda predicted)" if grid["cuda_predicted"] else ""),
                  box=box.SIMPLE_HEAD, pad_edge=False)
        g.add_column("width \\ batch")
        for b in grid["batches"]:
            g.add_column(str(b), justify="right")
        for i, w in enumerate(grid["widths"]):
            row = []
            for j in range(len(grid["batches"])):
                c, d = grid["cpu_ms"][i][j], grid["cuda_ms"][i][j]
                cell = f"{c:.2f} / {d:.2f}" if c is not None and d is not None else "-"
                row.append(Text(cell, style="green" if c and d and d < c else ""))
            g.add_row(str(w), *row)
        parts.append(g)
    if result.recommendation:
        parts.append(Text(f"Recommendation: {result.recommendation}", style="bold green"))
    parts += [Text(f"note: {n}", style="yellow") for n in result.notes]
    return Group(*parts)


def _signed(value: float | None, ms: bool = False) -> str:
    return "-" if value is None else (f"{value:+.3f}" if ms else f"{value:+.1%}")


COMPARE_COLUMNS = ("", "A ms", "B ms", "B-A ms", "interval ms", "change", "interval")


def compare_view(c: Comparison) -> Group:
    """`trainspeed compare`: the line that judges, the step and each phase with intervals, the verdicts. Fits the
    width it is drawn in without cutting a number: the runs are named A and B above the table (their paths once,
    whole), each interval is one cell (`+3.2…+46.1%`), and where the table is too wide the intervals in ms go first,
    then the intervals of the change (`report/fitted.py`)."""
    parts: list[Table | Text] = [Text(c.line, style="bold")]
    for side, name, path in (("A", c.a, c.a_path), ("B", c.b, c.b_path)):
        parts.append(Text(f"{side} = {name}" + (f": {path}" if path and path != name else "")))
    rows = (c.step, *c.phases)

    def build(left_out: frozenset[str]) -> Table:
        shown = [col for col in COMPARE_COLUMNS if col not in left_out]
        said = "95% intervals" if "interval" in shown or "interval ms" in shown else "the intervals left out to fit"
        table = Table(box=box.SIMPLE_HEAD, title=f"B against A: medians per step, {said}", pad_edge=False)
        for col in shown:
            table.add_column(col, justify="left" if not col else "right", no_wrap=True,
                             min_width=max(len(ch.what) for ch in rows) if not col else None)
        for ch in rows:
            cells = {"": ch.what, "A ms": "-" if ch.a_ms is None else f"{ch.a_ms:.3f}",
                     "B ms": "-" if ch.b_ms is None else f"{ch.b_ms:.3f}", "B-A ms": _signed(ch.delta_ms, ms=True),
                     "interval ms": "-" if ch.delta_low is None or ch.delta_high is None else
                     f"{ch.delta_low:+.3f}…{ch.delta_high:+.3f}",
                     "change": _signed(ch.change),
                     "interval": "-" if ch.low is None or ch.high is None else
                     f"{ch.low * 100:+.1f}…{ch.high * 100:+.1f}%"}
            style = "bold" if ch.what == "step" else ("yellow" if ch.real else None)
            table.add_row(*(cells[col] for col in shown), style=style)
        return table

    parts.append(Fitted(build, drop=("interval ms", "interval")))  # type: ignore[arg-type]
    words = {"appeared": "appeared in", "went away": "went away in", "in both": "in both"}
    for v in c.verdicts:
        where = c.b if v.status != "in both" else ""
        pred = " / ".join(f"{p:.2f}x" if p else "-" for p in (v.a_predicted, v.b_predicted))
        parts.append(Text(f"verdict {v.id}: {words[v.status]} {where}".rstrip() + f" (predicted {pred})"))
    parts.extend(Text(note, style="dim") for note in c.notes)
    return Group(*parts)
