"""The doctor's whole terminal view (rich, `trainspeed doctor --verbose`): the step split into phases, the counts, the
places, the verdicts with all their evidence. One function per section, joined in the order a reader takes them
(`doctor_view`); the short screen (`doctor_brief.py`) takes some of them as they are."""

from __future__ import annotations

import mmap

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from trainspeed.diagnose.op_clock import on_phase_clock, outgrown
from trainspeed.diagnose.report import DoctorReport
from trainspeed.diagnose.rules import page_faults_candidate, predicted_label
from trainspeed.diagnose.rules.brief import every
from trainspeed.diagnose.verdict import Verdict
from trainspeed.load.view import others_busy, waited_ms, waits_share
from trainspeed.report.distributed import distributed_lines
from trainspeed.report.tried import tried_view
from trainspeed.watch.frameworks import framework_label
from trainspeed.watch.result import WatchResult

WAIT_COLUMN = 0.02
"""The phases' waits for a core, a share of the step, from which the phase table shows them (a quiet machine's are
a fraction of a percent)."""

DATA_LINES_SHARE = 0.05
"""The doctor's summary lists what the DataLoader ran only where waiting on it took this share of the run or more
(the JSON and HTML reports list it always)."""

Parts = list[RenderableType]


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


def window_lines(report: DoctorReport) -> list[str]:
    """`--window`'s steps in words: which steps the report covers of a run that went on (or that ended first), how
    long the training waited for the report, and what a window of that length cannot have seen."""
    w = report.watch
    rw = w.run_window
    if rw is None:
        return []
    if rw.opened_at is None:
        return [f"The run ended at step {rw.ended_at}, before the window {rw.asked} opened: nothing watched."]
    if rw.closed_at is None:
        return [f"The run ended at step {rw.ended_at}, inside the window {rw.asked} (steps {rw.opened_at} to "
                f"{rw.ended_at} here)."]
    span = rw.closed_at - rw.opened_at
    lines = [f"Watched steps {rw.opened_at} to {rw.closed_at} of a run that went on"
             + (f"; the report held it {rw.held_s:.2f} s." if rw.held_s is not None else ".")]
    unseen = [what for what, seen in (("evaluations", w.evaluation is not None), ("saves", w.checkpoints.saves > 0))
              if not seen]
    if unseen:
        lines.append(f"Not seen in the window: {' or '.join(unseen)} less often than every {span} steps.")
    return lines


def doctor_view(report: DoctorReport) -> Group:
    """`trainspeed doctor --verbose`: the step split into phases, the counts, the places, every verdict's whole
    evidence and action (the short screen is `doctor_brief.brief_view`)."""
    w = report.watch
    parts: Parts = [head_line(report), *(Text(line, style="dim") for line in window_lines(report))]
    if w.steps.median_ms is None:
        parts.append(Text(f"No training step completed ({w.steps.seen} seen): nothing to split.", style="yellow"))
    else:
        parts += steps_lines(report) + _phase_table(w) + [_per_step(w)]
    parts += counted_lines(w) + _places(w) + gpu_util_lines(w)
    if w.distributed is not None:
        parts += distributed_lines(w.distributed)
    parts += _verdicts(report) + closing_lines(report)
    return Group(*parts)


def closing_lines(report: DoctorReport) -> Parts:
    """The run's notes, then what `--try` measured."""
    parts: Parts = [Text(f"note: {n}", style="yellow") for n in report.watch.notes + report.notes]
    return parts + (tried_view(report.tried) if report.tried is not None else [])


def head_line(report: DoctorReport) -> Text:
    """"trainspeed doctor: train.py on CPU, inside ... (how the script ended)"."""
    w = report.watch
    head = f"trainspeed doctor: {report.script or 'watched loop'} on {w.model.device.upper()}"
    if w.framework is not None:
        head += f", inside {framework_label(w.framework)}"
    if report.fate:
        head += f" ({report.fate})"
    return Text(head, style="bold")


def steps_lines(report: DoctorReport) -> Parts:
    """The steps seen and measured, their median and p90, and the loop's part of the script's time."""
    w = report.watch
    paced = f" (the GPU's pace; the host's {w.steps.host_median_ms:.3f} ms)" if w.steps.host_median_ms is not None else ""
    parts: Parts = [Text(f"{w.steps.seen} steps seen, {w.steps.measured} measured: median {w.steps.median_ms:.3f} ms, "
                         f"p90 {w.steps.p90_ms:.3f} ms per step{paced}")]
    if (process := process_line(report)) is not None:
        parts.append(Text(process[0].upper() + process[1:], style="dim"))
    return parts


def _phase_table(w: WatchResult) -> Parts:
    """Each phase's host and device times and share (and its wait for a core, where the waits were a share worth
    showing), with what the columns mean."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    waits = (waits_share(w) or 0.0) >= WAIT_COLUMN
    for col in ("phase", "host ms", "device ms", "share", *(("waited",) if waits else ()), ""):
        table.add_column(col, justify="left" if col in ("phase", "") else "right")
    for name, stat in w.phases.items():
        dev = f"{stat.device_ms:.3f}" if stat.device_ms is not None else "-"
        wait = (f"{w.load.phase(name).wait_share or 0.0:.0%}",) if waits and w.load is not None else ()
        table.add_row(name, f"{stat.host_ms:.3f}", dev, f"{stat.share:.1%}", *wait, "#" * round(stat.share * 20))
    parts: Parts = [table]
    if waits:
        parts.append(Text(f"waited: the part of the phase's time lost waiting for a core (the training "
                          f"thread's and, on a busy machine, torch's intra-op threads'; Linux's run-queue "
                          f"counts, between their longest and their sum each step): {waited_ms(w):.2f} ms of the "
                          f"{w.steps.mean_ms or w.steps.median_ms:.2f} ms mean step", style="dim"))
    if w.model.device == "cuda":
        parts.append(Text("device ms: the stream's time from a phase's first edge to its last, idle gaps "
                          "included; the GPU's own work is below", style="dim"))
    return parts


def _per_step(w: WatchResult) -> Text:
    """"per step: 0.00 syncs ..., 0.00 MiB host->device, 42 aten ops; batch 120"."""
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
    return Text(f"per step: {reads}, {w.steps.h2d_bytes_per_step / 2**20:.2f} MiB "
                f"host->device, {ops}{kernels}; batch {w.model.batch_size or '?'}"
                + (f", under {w.model.autocast} autocast" if w.model.autocast else ""))


def counted_lines(w: WatchResult) -> Parts:
    """What else the run did that the doctor counted: recompute, compiles, page faults, workers, saves, evaluations."""
    parts: Parts = []
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
        often = f", {every(w.checkpoints.every_steps)}" if w.checkpoints.every_steps else ""
        calls = f" ({w.checkpoints.calls} torch.save calls)" if w.checkpoints.calls > w.checkpoints.saves else ""
        parts.append(Text(f"saves (torch.save): {w.checkpoints.saves} in the run{calls}{often}; "
                          f"{w.phases['checkpoint'].share:.1%} of the measured run's time"))
    if w.evaluation is not None:
        ev = w.evaluation
        told = "model.eval() until the model trains again" if ev.by == "model.eval()" else ev.by
        often = f", {every(ev.every_steps)}" if ev.every_steps else ""
        parts.append(Text(f"evaluation ({told}): {ev.seen} in the run{often}; the {ev.count} during the measured steps "
                          f"{ev.mean_ms:.1f} ms each, {ev.share:.0%} of their time"))
    return parts


def _places(w: WatchResult) -> Parts:
    """Where the time went, by line: the reads, "other", the data waits, the framework, the loop's line, the ops."""
    parts: Parts = []
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
    ops = w.window.op_times or []
    shared = others_busy(w)  # the ops' times less their threads' summed waits: no rate to read off them
    if shared and ops:
        parts.append(Text("  the ops' times below are less their threads' waits for a core, summed: beside busy "
                          "processes a parallel op's can read below its work", style="dim"))
    step_ops = [op for op in ops if op.in_step][:3]  # the step's own ops; a DataLoader's apart, below
    for over in outgrown(w, tuple(dict.fromkeys(op.phase for op in step_ops if op.phase))):
        parts.append(Text(f"  timed one call at a time in the profiler window, the {over.phase}'s ops came to "
                          f"{over.ops_ms:.3f} ms a step, more than the {over.phase}'s {over.phase_ms:.3f} ms: below, "
                          f"each of their {over.calls:,.0f} calls is {over.excess_us:.1f} us less (0 at the least), so that "
                          "they add to it", style="dim"))
    for op in step_ops:
        ms = on_phase_clock(w, op)
        parts.append(Text(f"  op {op.op} ({op.dtype or '-'}) x{op.calls:.0f}: {ms:.3f} ms per step in the "
                          "profiler window" + (f", in {op.phase}" if op.phase else "") +
                          (f", {op.flops / (ms * 1e6):.1f} GFLOP/s" if op.flops and ms and not shared else ""),
                          style="dim"))
    loader = [op for op in ops if op.phase == "data"]
    if loader:
        parts.append(Text(f"  the DataLoader's ops (collating its batches): {sum(op.ms for op in loader):.3f} ms per "
                          f"step, {', '.join(f'{op.op} x{op.calls:.0f}' for op in loader[:3])}", style="dim"))
    return parts


def gpu_util_lines(w: WatchResult) -> Parts:
    util = w.gpu_util
    if util.available:
        return [Text(f"GPU utilisation: mean {util.mean:.0f}% over {util.samples} samples"
                     + (" - saw-tooth" if util.sawtooth else ""))]
    if w.model.device == "cuda":
        return [Text(f"GPU utilisation: unavailable ({util.why})", style="dim")]
    return []


def verdicts_heading(report: DoctorReport) -> Parts:
    """The verdicts' heading, and why there are none where there are none."""
    parts: Parts = [Text("Verdicts, most important first (speed-ups are predictions):", style="bold")]
    if not report.verdicts and report.watch.steps.median_ms is None:
        parts.append(Text("  none: no training step completed, so there is nothing to judge", style="yellow"))
    elif not report.verdicts:
        parts.append(Text("  none: no rule found a problem worth a tenth of the step", style="green"))
    return parts


def _verdicts(report: DoctorReport) -> Parts:
    """The verdicts, most important first: each one's id and prediction, evidence, action and lever."""
    parts = verdicts_heading(report)
    for i, v in enumerate(report.verdicts, 1):
        gain = f" - {prediction_words(report, v)}" if v.predicted_speedup else ""
        title = f"{v.title} [{v.id}]" if v.title else v.id
        parts.append(Text(f"{i}. {title}{gain}", style="bold cyan"))
        if not v.predicted_speedup and v.unpredicted:
            parts.append(Text(f"   no prediction: {v.unpredicted}"))
        parts.append(Text(f"   evidence: {v.evidence}"))
        parts.append(Text(f"   action:   {v.action}"))
        if v.lever is not None and report.tried is None:
            parts.append(Text(f"   lever:    {v.lever.paste} (`trainspeed doctor --try` applies it and times it)",
                              style="dim"))
    return parts


def _of_samples(samples: int, share: float) -> str:
    """"60% of 48 samples": a site's share with the number of stack samples it is a share of (a share of a few
    samples is a rough one)."""
    return f"{share:.0%} of {round(samples / share) if share else samples} samples"
