"""The doctor's short screen: the machine's load said once, the step's split, and each verdict in at most five lines
of 80 columns (what is wrong, what it would buy and what `--try` measured, the one line of evidence, the fix). Every
figure it leaves out is in `--verbose` (`doctor_text.doctor_view`), the JSON and HTML reports and
`trainspeed explain ID`."""

from __future__ import annotations

import os
import textwrap

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from trainspeed.diagnose.report import DoctorReport
from trainspeed.diagnose.rules import MAX_PREDICTED
from trainspeed.diagnose.rules.registry import script_view
from trainspeed.diagnose.tried import TriedLever
from trainspeed.diagnose.verdict import Verdict
from trainspeed.load.view import others_busy
from trainspeed.report.distributed import distributed_lines
from trainspeed.report.doctor_text import (
    closing_lines,
    counted_lines,
    gpu_util_lines,
    head_line,
    steps_lines,
    verdicts_heading,
    window_lines,
)
from trainspeed.report.tried import measured_words
from trainspeed.watch.result import WatchResult

WIDTH = 80
"""The columns a verdict's lines keep to (a CI log's, a laptop's split terminal)."""
MOST_LINES = 5
"""The lines a verdict takes at most."""
INDENT = "   "

Parts = list[RenderableType]


def _wrapped(text: str) -> list[str]:
    """`text` indented under a verdict's title, wrapped at WIDTH between words (code is never split inside a word)."""
    return textwrap.wrap(text, WIDTH, initial_indent=INDENT, subsequent_indent=INDENT, break_long_words=False,
                         break_on_hyphens=False) or [INDENT]


def gain_words(v: Verdict, whole: float | None, tried: TriedLever | None = None) -> str:
    """"predicted 2.26x on the training loop, 1.45x on the whole script", or with what `--try` measured of it
    ("...; --try measured 2.61x [2.32, 2.94]": both of the training run), or why nothing is predicted."""
    gain = v.predicted_speedup
    if not gain:
        return f"no prediction: {v.unpredicted or 'no model of this cause predicts a speed-up'}"
    capped = gain >= MAX_PREDICTED
    most = "at most " if v.bound and not capped else ""
    words = f"predicted {'at least ' if capped else most}{gain:.{0 if capped else 2}f}x on the training loop"
    if tried is not None:  # ("at most" and "at least" take the room of "on the training loop": --try's is that too)
        words = words.removesuffix(" on the training loop") if most or capped else words
        return words + ("; --try: the run with this fix failed (below)" if tried.failed else
                        f"; --try measured {measured_words(tried)}")
    if whole is not None:
        return words + f", {whole:.2f}x on the whole script"
    return words + (f" (no prediction goes past {MAX_PREDICTED:.0f}x)" if capped else "")


def site_words(site: str) -> str:
    """A `file:line` as the short screen names it: relative to the working folder where the file is under it."""
    path, sep, line = site.rpartition(":")
    if not sep or not os.path.isabs(path):
        return site
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return site
    return f"{relative}:{line}" if not relative.startswith("..") else site


def fix_words(v: Verdict) -> str:
    """"fix at train.py:42: if step % 12 == 0: torch.save(...)": the change, and the line it goes at."""
    fix = v.fix or (v.lever.paste if v.lever is not None else v.action)
    return f"fix at {site_words(v.site)}: {fix}" if v.site else f"fix: {fix}"


def verdict_lines(v: Verdict, index: int, whole: float | None = None, tried: TriedLever | None = None) -> list[str]:
    """One verdict as the short screen shows it: its title in words (and its id, for `trainspeed explain`), the
    predicted gain (with `--try`'s measured speed-up where it ran), one line of evidence, the fix."""
    title = f"{index}. {v.title or v.id} [{v.id}]"
    if not v.predicted_speedup and len(title) + len(NO_PREDICTION) <= WIDTH:
        title = f"{index}. {v.title or v.id}{NO_PREDICTION} [{v.id}]"
    lines = textwrap.wrap(title, WIDTH, subsequent_indent=INDENT, break_long_words=False)
    lines += _wrapped(gain_words(v, whole, tried))
    lines += _wrapped(v.brief or v.evidence)
    lines += _wrapped(fix_words(v))
    return lines


NO_PREDICTION = " (no prediction)"
"""Said in a verdict's title where it predicts nothing and the title has room (the next line says why)."""


def load_line(report: DoctorReport, net: WatchResult | None = None) -> str | None:
    """The machine's load in one line, where other processes held cores: what the verdicts about the script are
    judged on (`net`: the run as `registry.script_view` makes it, where the caller has it already)."""
    w = report.watch
    if not others_busy(w) or w.load is None:
        return None
    others = w.load.others_cpu_cores or 0.0
    cpus = report.context.logical_threads
    line = f"Other processes kept {others:.1f} of this machine's {cpus} CPUs busy"
    net = net if net is not None else script_view(w)
    if net is not None and net.steps.median_ms and w.steps.median_ms:
        return (line + f": the verdicts about the script judge its steps without their waits for a CPU "
                f"({net.steps.median_ms:.2f} ms a step, {w.steps.median_ms:.2f} ms measured).")
    return line + ": its times may be longer than on a machine of its own."


def brief_view(report: DoctorReport) -> Group:
    """The `trainspeed doctor` screen: the load, the steps and their phases, the verdicts, five lines each."""
    w = report.watch
    net = script_view(w)
    parts: Parts = [head_line(report), *(Text(line, style="dim") for line in window_lines(report))]
    if (load := load_line(report, net)) is not None:
        parts.append(Text(load, style="yellow"))
    if w.steps.median_ms is None:
        if w.run_window is None or w.run_window.opened_at is not None:
            parts.append(Text(f"No training step completed ({w.steps.seen} seen): nothing to split.", style="yellow"))
    else:
        parts += steps_lines(report)[:1]
        loop, total = w.steps.loop_s, report.process_s
        if loop and total and loop <= total:
            parts.append(Text(f"The training loop took {loop:.1f} s of the script's {total:.1f} s.", style="dim"))
        parts += [phase_table(w, net)] + per_step_lines(w)
    parts += counted_lines(w) + gpu_util_lines(w)
    if w.distributed is not None:
        parts += distributed_lines(w.distributed)
    parts += verdicts_view(report) + closing_lines(report)
    return Group(*parts)


def phase_table(w: WatchResult, net: WatchResult | None = None) -> Table:
    """The phases that took time: each one's milliseconds a step (host and, on a GPU, device) and its share; beside
    busy processes (`net`: the run less its waits for a CPU) also the share the verdicts judge."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    cuda = w.model.device == "cuda"
    for col in ("phase", "host ms", *(("device ms",) if cuda else ()), "share",
                *(("without waits",) if net is not None else ()), ""):
        table.add_column(col, justify="left" if col in ("phase", "") else "right")
    for name, stat in w.phases.items():
        if stat.share < 0.0005 and stat.host_ms < 0.0005 and not (stat.device_ms or 0.0) >= 0.0005:
            continue  # a phase the run never entered
        dev = (f"{stat.device_ms:.3f}" if stat.device_ms is not None else "-",) if cuda else ()
        judged = (f"{net.phases[name].share:.1%}",) if net is not None else ()
        share = net.phases[name].share if net is not None else stat.share
        table.add_row(name, f"{stat.host_ms:.3f}", *dev, f"{stat.share:.1%}", *judged, "#" * round(share * 20))
    return table


def per_step_lines(w: WatchResult) -> Parts:
    """What a step did, in short lines, the counts that are zero left out."""
    counts = [f"batch {w.model.batch_size}" if w.model.batch_size else None,
              f"{w.window.ops_per_step:.0f} torch ops" if w.window.ops_per_step is not None else None,
              f"{w.window.kernels_per_step:.0f} CUDA kernels" if w.window.kernels_per_step else None,
              f"{w.steps.syncs_per_step:.1f} syncs (host reads of GPU values)" if w.steps.syncs_per_step >= 0.05
              else None,
              f"{w.steps.h2d_bytes_per_step / 2**20:.2f} MiB host->device" if w.steps.h2d_bytes_per_step else None,
              f"{w.model.autocast} autocast" if w.model.autocast else None]
    said = [c for c in counts if c]
    parts: Parts = [Text("per step: " + ", ".join(said))] if said else []
    if w.window.gpu_busy_ms_per_step is not None and w.steps.median_ms:
        parts.append(Text(f"the GPU works {w.window.gpu_busy_ms_per_step:.3f} ms of the step "
                          f"({w.window.gpu_busy_ms_per_step / w.steps.median_ms:.0%})"))
    return parts


def verdicts_view(report: DoctorReport) -> Parts:
    """The verdicts, most important first, five lines each at most."""
    parts = verdicts_heading(report)
    tried = {row.verdict: row for row in report.tried.rows} if report.tried is not None else {}
    for i, v in enumerate(report.verdicts, 1):
        lines = verdict_lines(v, i, report.process_speedup(v), tried.get(v.id))
        parts.append(Text(lines[0], style="bold cyan"))
        parts += [Text(line) for line in lines[1:]]
    if report.probes_s is not None and report.probes_s >= PROBES_SAID_S:
        parts.append(Text(f"The doctor's probes of this machine took {report.probes_s:.1f} s after the run.",
                          style="dim"))
    if report.verdicts:
        parts.append(Text("Every figure: --verbose, or `trainspeed explain ID` on a report kept with --out.",
                          style="dim"))
    return parts


PROBES_SAID_S = 1.0
"""The probes' seconds after the run are said on the short screen from this long (they are always in the JSON)."""
