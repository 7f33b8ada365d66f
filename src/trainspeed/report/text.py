"""Terminal views (rich) of result objects."""

from __future__ import annotations

import mmap

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from trainspeed.demo.result import DemoResult
from trainspeed.diagnose.compare import Comparison
from trainspeed.diagnose.report import DoctorReport
from trainspeed.diagnose.rules import page_faults_candidate, predicted_label
from trainspeed.diagnose.verdict import Verdict
from trainspeed.hardware.cpu import CpuInfo
from trainspeed.hardware.cpu_generations import TRAINING_FEATURES, contradicted_by_isa, from_cpuid
from trainspeed.hardware.gpu import GpuInfo
from trainspeed.hardware.report import HardwareReport
from trainspeed.load.view import waited_ms, waits_share
from trainspeed.memory.result import CATEGORIES, MemoryReport
from trainspeed.report.distributed import distributed_lines
from trainspeed.report.tried import tried_view
from trainspeed.sweep.result import SweepResult
from trainspeed.units import gib, human_bytes
from trainspeed.watch.frameworks import framework_label

_SOURCE_WORDS = {"model name": "from the model name", "cpuid": "from CPUID family/model",
                 "isa flags": "a lower bound from the ISA flags",
                 "isa flags, not cpuid": "a lower bound from the ISA flags"}


WAIT_COLUMN = 0.02
"""The phases' waits for a core, a share of the step, from which the phase table shows them (a quiet machine's are
a fraction of a percent)."""


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
        table.add_row(r.device, r.variant, f"{r.seconds:.3f}", f"{r.us_per_epoch:.1f}", str(r.syncs),
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
            gain = f" ({predicted_label(v.predicted_speedup)})" if v.predicted_speedup else ""
            parts.append(Text(f"{i}. {v.id}{gain}: {v.evidence}. Action: {v.action}"))
    if folder:
        parts.append(Text(f"Wrote {folder}", style="dim"))
    return Group(*parts)


MAX_LAYER_ROWS = 40


def memory_view(report: MemoryReport) -> Group:
    """The `trainspeed memory` screen: the peak, its parts, the batch that fits, the layers."""
    est, search, measured = report.estimate, report.search, report.measured
    parts: list[Table | Text] = []
    shape = "x".join(str(d) for d in report.input_shape)
    if est is not None:
        amp = est.amp or (f"{est.fsdp_param_dtype} in FSDP2's units" if est.fsdp_param_dtype else "fp32")
        ckpt = ", checkpointing" if est.checkpointing else ""
        parts.append(Text(f"{report.model}: {est.param_count:,} parameters; batch {report.batch_size} of "
                          f"{shape} {report.input_dtype}; {est.optimizer}, {amp}{ckpt}; target {est.device}", style="bold"))
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
    if search is not None:
        budget = f"{human_bytes(search.budget_bytes)} with a {search.margin:.0%} margin"
        if search.max_batch is None:
            parts.append(Text(f"Largest batch under {budget}: none - not even a batch of 1 fits", style="red"))
        else:
            how = "measured and confirmed" if search.confirmed else "measured" if search.trials else "predicted"
            peak = f" (peak {human_bytes(search.predicted_bytes)} predicted)" if search.predicted_bytes else ""
            per_rank = " per rank" if est is not None and est.shard else ""
            parts.append(Text(f"Largest batch{per_rank} under {budget}: {search.max_batch:,}{peak}, {how}",
                              style="green"))
            for b, ok, peak_b in search.trials:
                verdict = "fits" if ok else ("out of memory" if peak_b is None else "over budget")
                parts.append(Text(f"  trial batch {b:,}: {verdict}" + (f", measured {human_bytes(peak_b)}" if peak_b else ""), style="dim"))
    if report.fewest_ranks is not None and search is not None:
        table = Table(title=f"The fewest ranks of {human_bytes(search.budget_bytes)} ({search.margin:.0%} kept free) "
                            f"for a batch of {report.batch_size} per rank (predicted)", box=box.SIMPLE_HEAD,
                      pad_edge=False)
        for col in ("shard", "ranks", "busiest rank's peak"):
            table.add_column(col, justify="left" if col == "shard" else "right")
        for fit in report.fewest_ranks:
            table.add_row(fit.shard, f"{fit.ranks:,}" if fit.ranks is not None else
                          "none fits" if fit.confirmed else "none found",
                          human_bytes(fit.peak_bytes) if fit.peak_bytes is not None else "-")
        parts.append(table)
    if measured is not None:
        err = f"; the estimate is off by {report.error_pct:+.2f}%" if report.error_pct is not None else ""
        parts.append(Text(f"Measured on {measured.device}: {human_bytes(measured.peak_bytes)} "
                          f"({measured.peak_bytes:,} bytes, {measured.method}){err}"))
    if est is not None and est.layers:
        table = Table(title="Per layer (one row per call)", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("layer", "type", "output shape", "params", "saved for backward"):
            table.add_column(col, justify="right" if col in ("params", "saved for backward") else "left")
        for row in est.layers[:MAX_LAYER_ROWS]:
            out_shape = "x".join(str(d) for d in row.output_shape) if row.output_shape else "-"
            table.add_row(row.name, row.kind, out_shape, f"{row.params:,}", human_bytes(row.saved_bytes))
        parts.append(table)
        if len(est.layers) > MAX_LAYER_ROWS:
            parts.append(Text(f"... {len(est.layers) - MAX_LAYER_ROWS} more rows in --json", style="dim"))
    notes = report.notes + (est.notes if est else [])
    parts += [Text(f"note: {n}", style="yellow") for n in notes]
    return Group(*parts)


DATA_LINES_SHARE = 0.05
"""The doctor's summary lists what the DataLoader ran only where waiting on it took this share of the run or more
(the JSON and HTML reports list it always)."""


def prediction_words(report: DoctorReport, v: Verdict) -> str:
    """"predicted 2.26x (1.45x on the whole process)": the training loop's prediction, and the process's where the
    doctor timed it (`DoctorReport.process_speedup`)."""
    words = predicted_label(v.predicted_speedup or 1.0)
    whole = report.process_speedup(v)
    return words + (f" ({whole:.2f}x on the whole process)" if whole is not None else "")


def process_line(report: DoctorReport) -> str | None:
    """"the training loop took 3.1 s of the script's 5.0 s ...": where a prediction's whole-process figure comes from."""
    loop, total = report.watch.steps.loop_s, report.process_s
    if not loop or not total or loop > total:
        return None
    return (f"the training loop took {loop:.1f} s of the script's {total:.1f} s; the rest ({total - loop:.1f} s: "
            "start-up, set-up, what follows the loop) is held as it was in each whole-process prediction")


def doctor_view(report: DoctorReport) -> Group:
    """The `trainspeed doctor` screen: the step split into phases, the counts, the verdicts."""
    w = report.watch
    parts: list[RenderableType] = []
    head = f"trainspeed doctor: {report.script or 'watched loop'} on {w.model.device.upper()}"
    if w.framework is not None:
        head += f", inside {framework_label(w.framework)}"
    if report.fate:
        head += f" ({report.fate})"
    parts.append(Text(head, style="bold"))
    if w.steps.median_ms is None:
        parts.append(Text(f"No training step completed ({w.steps.seen} seen): nothing to split.", style="yellow"))
    else:
        paced = f" (the GPU's pace; the host's {w.steps.host_median_ms:.3f} ms)" if w.steps.host_median_ms is not None else ""
        parts.append(Text(f"{w.steps.seen} steps seen, {w.steps.measured} measured: median {w.steps.median_ms:.3f} ms, "
                          f"p90 {w.steps.p90_ms:.3f} ms per step{paced}"))
        if (process := process_line(report)) is not None:
            parts.append(Text(process[0].upper() + process[1:], style="dim"))
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        waits = (waits_share(w) or 0.0) >= WAIT_COLUMN
        for col in ("phase", "host ms", "device ms", "share", *(("waited",) if waits else ()), ""):
            table.add_column(col, justify="left" if col in ("phase", "") else "right")
        for name, stat in w.phases.items():
            dev = f"{stat.device_ms:.3f}" if stat.device_ms is not None else "-"
            wait = (f"{w.load.phase(name).wait_share or 0.0:.0%}",) if waits and w.load is not None else ()
            table.add_row(name, f"{stat.host_ms:.3f}", dev, f"{stat.share:.1%}", *wait, "#" * round(stat.share * 20))
        parts.append(table)
        if waits:
            parts.append(Text(f"waited: the part of the phase's time lost waiting for a core (the training "
                              f"thread's and, on a busy machine, torch's intra-op threads'; Linux's run-queue "
                              f"counts, between their longest and their sum each step): {waited_ms(w):.2f} ms of the "
                              f"{w.steps.mean_ms or w.steps.median_ms:.2f} ms mean step", style="dim"))
        if w.model.device == "cuda":
            parts.append(Text("device ms: the stream's time from a phase's first edge to its last, idle gaps "
                              "included; the GPU's own work is below", style="dim"))
        ops = (f"{w.window.ops_per_step:.0f}" if w.window.ops_per_step is not None else "?") + " aten ops"
        if w.window.other_ops_per_step:
            ops += f" ({w.window.other_ops_per_step:.0f} of them in 'other')"
        kernels = f", {w.window.kernels_per_step:.0f} CUDA kernels" if w.window.kernels_per_step is not None else ""
        if w.window.gpu_busy_ms_per_step is not None and w.steps.median_ms:
            kernels += (f" (the GPU works {w.window.gpu_busy_ms_per_step:.3f} ms of the step, "
                        f"{w.window.gpu_busy_ms_per_step / w.steps.median_ms:.0%})")
        reads = f"{w.steps.syncs_per_step:.2f} syncs (host reads of device data)"
        if w.steps.host_reads_per_step:
            reads += f", {w.steps.host_reads_per_step:.2f} reads of CPU tensors (no wait)"
        parts.append(Text(f"per step: {reads}, {w.steps.h2d_bytes_per_step / 2**20:.2f} MiB "
                          f"host->device, {ops}{kernels}; batch {w.model.batch_size or '?'}"
                          + (f", under {w.model.autocast} autocast" if w.model.autocast else "")))
    if w.steps.recompute_ms_per_step:
        parts.append(Text(f"backward recomputes checkpointed forwards (activation checkpointing): "
                          f"{w.steps.recompute_ms_per_step:.2f} ms per step, in the backward phase"))
    if w.machine.compiles is not None:
        parts.append(Text(f"torch.compile: {w.machine.compiles.count} graph(s) compiled while the steps were measured, "
                          f"{w.machine.compiles.seconds:.2f} s"))
    if w.machine.page_faults_per_step is not None and page_faults_candidate(w):  # a MiB of fresh pages a step or more
        parts.append(Text(f"page faults: {w.machine.page_faults_per_step:,.0f} minor per step, "
                          f"{w.machine.page_faults_per_step * mmap.PAGESIZE / 2**20:,.1f} MiB of fresh memory a step"))
    if w.machine.loader_workers is not None:
        parts.append(Text(f"DataLoader worker processes: {w.machine.loader_workers.batches} batches while measured, "
                          f"{w.machine.loader_workers.cpu_ms_per_batch:.2f} ms of CPU each"))
    if w.checkpoints.saves:
        every = f", one every {w.checkpoints.every_steps:.0f} steps" if w.checkpoints.every_steps else ""
        calls = f" ({w.checkpoints.calls} torch.save calls)" if w.checkpoints.calls > w.checkpoints.saves else ""
        parts.append(Text(f"saves (torch.save): {w.checkpoints.saves} in the run{calls}{every}; "
                          f"{w.phases['checkpoint'].share:.1%} of the measured run's time"))
    if w.evaluation is not None:
        ev = w.evaluation
        told = "model.eval() until the model trains again" if ev.by == "model.eval()" else ev.by
        seen = ev.seen
        every = f", one every {ev.every_steps:.0f} steps" if ev.every_steps else ""
        parts.append(Text(f"evaluation ({told}): {seen} in the run{every}; the {ev.count} during the measured steps "
                          f"{ev.mean_ms:.1f} ms each, {ev.share:.0%} of their time"))
    for s in w.reads.sync_sites[:3]:
        parts.append(Text(f"  sync site {s.where}: {s.op} x{s.count}, {s.total_ms:.1f} ms in all", style="dim"))
    for s in w.reads.host_read_sites[:2]:
        parts.append(Text(f"  CPU tensor read at {s.where}: {s.op} x{s.count}, {s.total_ms:.1f} ms in all "
                          "(no sync; in the phase it ran in)", style="dim"))
    for o in w.sites.other[:3]:
        parts.append(Text(f"  'other' time at {o.where} ({_of_samples(o.samples, o.share_of_other)}): {o.code}",
                          style="dim"))
    waited = w.phases["data"].share >= DATA_LINES_SHARE
    for label, sites in (("data wait in", w.sites.data), ("in the DataLoader's worker processes,", w.sites.workers)):
        for d in sites[:3] if waited else ():
            told = f" ({d.machinery})" if d.machinery else (f": {d.code}" if d.code else "")
            parts.append(Text(f"  {label} {d.where} ({_of_samples(d.samples, d.share_of_data)}){told}", style="dim"))
    for f in w.sites.framework[:3]:
        parts.append(Text(f"  'other' time in the framework's {f.function} ({_of_samples(f.samples, f.share_of_other)})",
                          style="dim"))
    for o in w.sites.loop[:1]:
        if not w.sites.other or o.where != w.sites.other[0].where:
            parts.append(Text(f"  'other' time under the training loop's line {o.where} "
                              f"({_of_samples(o.samples, o.share_of_other)}, with the functions it calls): {o.code}",
                              style="dim"))
    for op in (w.window.op_times or [])[:3]:
        parts.append(Text(f"  op {op.op} ({op.dtype or '-'}) x{op.calls:.0f}: {op.ms:.3f} ms per step in the "
                          "profiler window" + (f", {op.flops / (op.ms * 1e6):.1f} GFLOP/s" if op.flops and op.ms else ""),
                          style="dim"))
    util = w.gpu_util
    if util.available:
        parts.append(Text(f"GPU utilisation: mean {util.mean:.0f}% over {util.samples} samples"
                          + (" - saw-tooth" if util.sawtooth else "")))
    elif w.model.device == "cuda":
        parts.append(Text(f"GPU utilisation: unavailable ({util.why})", style="dim"))
    if w.distributed is not None:
        parts += distributed_lines(w.distributed)
    parts.append(Text("Verdicts, most important first (speed-ups are predictions):", style="bold"))
    if not report.verdicts and w.steps.median_ms is None:
        parts.append(Text("  none: no training step completed, so there is nothing to judge", style="yellow"))
    elif not report.verdicts:
        parts.append(Text("  none: no rule found a problem worth a tenth of the step", style="green"))
    for i, v in enumerate(report.verdicts, 1):
        gain = f" - {prediction_words(report, v)}" if v.predicted_speedup else ""
        parts.append(Text(f"{i}. {v.id}{gain}", style="bold cyan"))
        parts.append(Text(f"   evidence: {v.evidence}"))
        parts.append(Text(f"   action:   {v.action}"))
        if v.lever is not None and report.tried is None:
            parts.append(Text(f"   lever:    {v.lever.paste} (`trainspeed doctor --try` applies it and times it)",
                              style="dim"))
    parts += [Text(f"note: {n}", style="yellow") for n in w.notes + report.notes]
    if report.tried is not None:
        parts += tried_view(report.tried)
    return Group(*parts)


def _of_samples(samples: int, share: float) -> str:
    """"60% of 48 samples": a site's share with the number of stack samples it is a share of (a share of a few
    samples is a rough one)."""
    return f"{share:.0%} of {round(samples / share) if share else samples} samples"


_SWEEP_EXTRAS = (("samples_per_s", "samples/s", "{:,.0f}"), ("peak_bytes", "peak", None),
                 ("records", "records", "{:.0f}"), ("read_us", "us/read", "{:.1f}"),
                 ("cost_per_record_us", "us/record", "{:.1f}"), ("saves", "saves", "{:.0f}"),
                 ("ms_per_save", "ms/save", "{:.1f}"),
                 ("speedup", "x one rank", "{:.2f}"), ("efficiency", "efficiency", "{:.0%}"),
                 ("allreduce_ms", "all-reduce ms", "{:.3f}"), ("bus_gbs", "bus GB/s", "{:.2f}"))


def sweep_view(result: SweepResult) -> Group:
    """The `trainspeed sweep` screen: one row per value, the findings, the advice."""
    table = Table(title=f"{result.knob} on {result.workload} ({result.device}; {result.steps} steps per trial, "
                        f"{result.repeats} repeats interleaved)", box=box.SIMPLE_HEAD, pad_edge=False)
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
        parts.append(Text(f"fit: seconds = {fit['a']:.4f} + {fit['b'] * 1e6:.2f} us x records (R^2 {fit['r2']:.3f})"))
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


def compare_view(c: Comparison) -> Group:
    """`trainspeed compare`: the line that judges, the step and each phase with intervals, the verdicts. Fits 80
    columns: the runs are named A and B above the table (their paths once, whole), and each interval is one cell
    (`+3.2…+46.1%`) that does not wrap."""
    parts: list[Table | Text] = [Text(c.line, style="bold")]
    for side, name, path in (("A", c.a, c.a_path), ("B", c.b, c.b_path)):
        parts.append(Text(f"{side} = {name}" + (f": {path}" if path and path != name else "")))
    table = Table(box=box.SIMPLE_HEAD, title="B against A: medians per step, 95% intervals", pad_edge=False)
    for col in ("", "A ms", "B ms", "B-A ms", "interval ms", "change", "interval"):
        table.add_column(col, justify="left" if not col else "right", no_wrap=True)
    for ch in (c.step, *c.phases):
        interval_ms = "-" if ch.delta_low is None or ch.delta_high is None else f"{ch.delta_low:+.3f}…{ch.delta_high:+.3f}"
        interval = "-" if ch.low is None or ch.high is None else f"{ch.low * 100:+.1f}…{ch.high * 100:+.1f}%"
        style = "bold" if ch.what == "step" else ("yellow" if ch.real else None)
        table.add_row(ch.what, "-" if ch.a_ms is None else f"{ch.a_ms:.3f}", "-" if ch.b_ms is None else f"{ch.b_ms:.3f}",
                      _signed(ch.delta_ms, ms=True), interval_ms, _signed(ch.change), interval, style=style)
    parts.append(table)
    words = {"appeared": "appeared in", "went away": "went away in", "in both": "in both"}
    for v in c.verdicts:
        where = c.b if v.status != "in both" else ""
        pred = " / ".join(f"{p:.2f}x" if p else "-" for p in (v.a_predicted, v.b_predicted))
        parts.append(Text(f"verdict {v.id}: {words[v.status]} {where}".rstrip() + f" (predicted {pred})"))
    parts.extend(Text(note, style="dim") for note in c.notes)
    return Group(*parts)
