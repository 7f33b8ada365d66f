"""`trainspeed doctor`: run a training script unchanged, split every step, name the bottleneck."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from trainspeed._io import check_writable_file, new_run_dir, write_atomic
from trainspeed.cli import doctor_fix
from trainspeed.cli._common import add_json_option, console_for, non_negative_int, positive_int, script_target
from trainspeed.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from trainspeed.diagnose.tried import Tried
    from trainspeed.doctor import Doctor, DoctorReport
    from trainspeed.tryout.runs import Patched
    from trainspeed.watch.session import Watcher
    from trainspeed.watch.window import WindowSpec

INTERRUPTED = 130
"""The exit status after Ctrl-C stopped the tries (the diagnosis and what they measured are still written)."""
DEFAULT_ROUNDS = 3
"""`--try`'s rounds when --rounds is not given."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="watch a training script, split each step, name the bottleneck",
                       description="Run SCRIPT (or -m MODULE) exactly as python would, watch every training "
                                   "step, and report where the time goes and what to change.")
    p.add_argument("--steps", type=positive_int, help="stop the script cleanly after N training steps")
    p.add_argument("--warmup", type=non_negative_int, default=None,
                   help="steps left out of the statistics (default 3, or 1 where the first step takes a second or more)")
    p.add_argument("--window", metavar="A:B",
                   help="watch steps A to B of the run (or Ns: its first N seconds of steps) and report then, while "
                        "the script runs on to its own end unwatched")
    p.add_argument("--html", metavar="PATH", help="write a self-contained HTML report")
    p.add_argument("--out", metavar="DIR", help="write doctor.json and report.html into a new folder under DIR")
    p.add_argument("--trace", metavar="PATH", help="write the kept steps' timeline as a Chrome/Perfetto trace-event "
                                                  "JSON (ui.perfetto.dev, chrome://tracing)")
    p.add_argument("--try", dest="try_k", type=positive_int, nargs="?", const=2, metavar="K",
                   help="then apply the first K verdicts' levers (default 2) in runs of their own, each timed against "
                        "runs without it, alternated, and show the measured speed-ups beside the predictions")
    p.add_argument("--rounds", type=positive_int, metavar="R",
                   help=f"with --try: rounds of runs (one plain, one per lever; default {DEFAULT_ROUNDS})")
    p.add_argument("--fix", nargs="?", const="", metavar="PATH",
                   help="write the verdicts' fixes as a patch of the script (default trainspeed.patch beside the "
                        "report, never over a file; a PATH ends in .patch or .diff, or give --fix=PATH); with --try, "
                        "each edit is also tried as a patched copy of the script")
    p.add_argument("--report-every", type=positive_int, metavar="N",
                   help="rewrite the report files (--json PATH, --html, --out) every N steps while the run goes on, "
                        "for a run that may be killed; the full report at its end")
    p.add_argument("--quiet", action="store_true",
                   help="no live line while watching (it shows where stderr and stdout are a terminal), nor the "
                        "window's opening and closing lines")
    p.add_argument("--verbose", action="store_true",
                   help="every figure: the places by line, and each verdict's whole evidence and action")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module, like python -m")
    add_json_option(p)
    p.add_argument("script", nargs="?", metavar="SCRIPT", help="the training script")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the script")
    p.set_defaults(run=run)


def _launch_rank() -> int:
    """This process's RANK under torchrun (0 otherwise)."""
    try:
        return int(os.environ.get("RANK", "0")) if "WORLD_SIZE" in os.environ else 0
    except ValueError:
        return 0


def _rescue(report: DoctorReport) -> Path:
    """The report's JSON written where it can be (a new file in the working folder, else the system's temporary
    folder), when the file asked for could not be written after the run."""
    from trainspeed.report.json import doctor_dict, dumps

    stamp = time.strftime("%Y%m%d-%H%M%S")
    for folder in (Path.cwd(), Path(tempfile.gettempdir())):
        for n in range(1, 100):
            candidate = folder / (f"doctor-{stamp}.json" if n == 1 else f"doctor-{stamp}-{n}.json")
            if candidate.exists():
                continue
            try:
                return write_atomic(candidate, dumps(doctor_dict(report)))
            except UsageError:
                break
    raise UsageError("the report could not be written anywhere (the working folder and the temporary folder "
                     "refused it)")


def run(args: argparse.Namespace) -> int:
    from trainspeed.doctor import script_report, watch_script
    from trainspeed.report.live import LiveLine

    target, script_args, module = script_target(args)
    spec = check_window(args)
    check_report_every(args)
    if args.rounds is not None and not args.try_k:
        raise UsageError("--rounds goes with --try")
    if args.try_k and "WORLD_SIZE" in os.environ:
        raise UsageError("--try runs the script again on its own; run it without torchrun")
    for path in (args.json, args.html, args.trace):
        if path:
            check_writable_file(path)
    fixing = doctor_fix.FixRequest(args, target, module) if args.fix is not None and not _launch_rank() else None
    folder = new_run_dir(args.out, "doctor") if args.out and not _launch_rank() else None

    named = f"-m {target}" if module else target
    command = shlex.join(["trainspeed", *getattr(args, "argv", ["doctor"])])
    rank = _launch_rank()

    lines: list[LiveLine] = []

    def started(watcher: Doctor) -> None:
        if not args.quiet:
            lines.append(LiveLine(watcher))
            lines[-1].start()

    def stop_lines() -> None:
        while lines:
            lines.pop().stop()

    def window_report(report: DoctorReport) -> None:
        """The window closed: the report, written and shown while the script waits (a failure said in one line)."""
        stop_lines()
        closed = report.watch.run_window.closed_at if report.watch.run_window is not None else None
        if not args.quiet:
            print(f"trainspeed doctor: the window {args.window} closed at step {closed}; its report, while the script "
                  "waits:", file=sys.stderr, flush=True)
        report = _named(report, named, command)
        try:
            _deliver(report, args, fixing, folder, (target, script_args, module))
        except UsageError as e:  # the script goes on: its run is not the report's to end
            print(f"trainspeed doctor: {e}", file=sys.stderr, flush=True)

    # with --json -, stdout carries the JSON: the script's own prints go to stderr meanwhile
    redirect = contextlib.redirect_stdout(sys.stderr) if args.json == "-" else contextlib.nullcontext()
    with redirect:
        watcher, outcome, process_s = watch_script(target, script_args, module, warmup=args.warmup, steps=args.steps,
                                                   trace=bool(args.trace), window=spec,
                                                   on_report=window_report if spec is not None and not rank else None,
                                                   on_start=started, every=args.report_every or 0,
                                                   on_every=_interim(args, folder, named, command)
                                                   if args.report_every and not rank else None)
        stop_lines()  # inside the redirect: the live line puts back the stdout it found
    if rank:  # under torchrun every rank watches itself; rank 0 gathers them and reports for all
        print(f"trainspeed doctor: rank {rank} watched its steps; rank 0 reports for every rank", file=sys.stderr)
        return outcome.exit_code
    if watcher.report is not None:  # the window closed and its report went out while the script ran
        return outcome.exit_code
    report = dataclasses.replace(script_report(watcher, outcome, process_s, named),
                                 when=time.strftime("%Y-%m-%d %H:%M"), command=command)
    if spec is not None:  # the steps watched are the window's, not the script's: no whole-script figures
        report = dataclasses.replace(report, process_s=None)
    return _deliver(report, args, fixing, folder, (target, script_args, module))


def check_window(args: argparse.Namespace) -> WindowSpec | None:
    """`--window`'s steps or seconds, and what it cannot go with, in one line each."""
    from trainspeed.watch.window import parse_window

    if args.window is None:
        return None
    spec = parse_window(args.window)
    if args.steps is not None:
        raise UsageError("--window and --steps do not go together: --steps stops the script, a window watches part "
                         "of a run that goes on")
    if args.try_k:
        raise UsageError("--try runs the script again; with --window the report comes while the script runs: "
                         "give one or the other")
    if spec.seconds is not None and "WORLD_SIZE" in os.environ:
        raise UsageError(f"--window {args.window}: under torchrun a window is steps (A:B), so that every rank closes "
                         "it at the same step")
    return spec


def _named(report: DoctorReport, script: str, command: str) -> DoctorReport:
    """A report made while the script runs (a window's, an interim one), named as the run's end names its report:
    the script, its verdicts' placeholders for it, the command line and the time."""
    from trainspeed.diagnose.verdict import named_script

    return dataclasses.replace(report, script=script, verdicts=named_script(report.verdicts, script),
                               when=time.strftime("%Y-%m-%d %H:%M"), command=command)


def check_report_every(args: argparse.Namespace) -> None:
    """What `--report-every` needs (files to rewrite) and cannot go with (a window's own report), in one line."""
    if args.report_every is None:
        return
    if args.window is not None:
        raise UsageError("--report-every and --window do not go together: a window's report comes as it closes")
    if args.json == "-" or not (args.json or args.html or args.out):
        raise UsageError("--report-every rewrites the report's files: give --json PATH, --html PATH or --out DIR")


def _interim(args: argparse.Namespace, folder: Path | None, named: str, command: str) -> Callable[[Watcher], None]:
    """`--report-every`'s report of the run so far, written over the same files (atomically) while the script waits:
    judged with the machine's constants measured now, before the script starts (no probe may run a model or an
    optimizer while the hooks are in); a failure is said in one line and the run goes on."""
    from trainspeed.diagnose.report import judge
    from trainspeed.measure import machine_context
    from trainspeed.report.files import write_doctor_report

    hardware, ctx = machine_context()

    def write(watcher: Watcher) -> None:
        try:
            report = judge(watcher.measurements(), ctx, hardware)
            note = (f"an interim report after {report.watch.steps.seen} steps of a run still training "
                    f"(--report-every {args.report_every}): judged with the machine's constants measured before the "
                    "script started; the probes that copy the run's own shapes come with the report at its end")
            report = dataclasses.replace(_named(report, named, command), notes=[*report.notes, note])
            write_doctor_report(report, folder=folder, html=args.html, json=args.json)
        except UsageError as e:
            print(f"trainspeed doctor: the interim report was not written: {e}", file=sys.stderr, flush=True)

    return write


def _deliver(report: DoctorReport, args: argparse.Namespace, fixing: doctor_fix.FixRequest | None,
             folder: Path | None, script: tuple[str, list[str], bool]) -> int:
    """The report, with --try's tries and --fix's patch, written and shown; the doctor's exit status."""
    from trainspeed.report.files import write_doctor_report
    from trainspeed.report.trace import chrome_trace

    target, script_args, module = script
    outcome_code = report.exit_code or 0
    console = console_for(args)
    shown = False
    patch, refused = None, None
    if fixing is not None:
        try:
            fixing.unchanged()
            patch = doctor_fix.make(fixing, report.verdicts)
        except UsageError as e:  # said once the report is written: the run is not lost with the patch
            refused = e
    if args.try_k and outcome_code == 0:
        _show(console, report, shown=False, verbose=args.verbose)  # the diagnosis first: the tries take a while
        shown = True
        report = dataclasses.replace(report, tried=_try(report, args, target, script_args, module, folder,
                                                        doctor_fix.patched(patch) if patch is not None else None))
    elif args.try_k:
        from trainspeed.diagnose.tried import Tried

        report = dataclasses.replace(report, tried=Tried(
            [], [], args.rounds or DEFAULT_ROUNDS, args.steps, 0.0,
            notes=[f"nothing tried: the script ended with status {outcome_code}"]))
    if fixing is not None and patch is not None:
        patch = doctor_fix.after_tries(fixing, patch, report.verdicts, report.tried)
        patch = doctor_fix.write(patch, fixing.destination(args, folder))
        report = dataclasses.replace(report, patch=patch)
    try:
        if args.trace:
            trace = chrome_trace(report.watch, f"trainspeed doctor: {report.script}")
            write_atomic(args.trace, json.dumps(trace, separators=(",", ":"), allow_nan=False) + "\n")
        write_doctor_report(report, folder=folder, html=args.html, json=args.json)
    except UsageError as e:  # the run is done: its summary and its report are not lost with the file
        _show(console, report, shown, args.verbose)
        raise UsageError(f"{e}; the report was saved to {_rescue(report)} instead") from None
    _show(console, report, shown, args.verbose)
    if report.patch is not None:  # unwrapped: the file's path and the diff are copied as printed
        from trainspeed.report.patch import diff_text, patch_view

        for line in patch_view(report.patch):
            console.print(line, soft_wrap=True)
        console.print(diff_text(report.patch), soft_wrap=True, end="")
    if folder is not None:
        console.print(f"Wrote {folder}" + (f" (a verdict's whole evidence: trainspeed explain ID {folder})"
                                           if report.verdicts else ""), style="dim")
    if refused is not None:
        raise refused
    if report.tried is not None and report.tried.interrupted:
        return INTERRUPTED
    return outcome_code


def _try(report: DoctorReport, args: argparse.Namespace, target: str, script_args: list[str], module: bool,
         folder: Path | None, patched: dict[str, Patched] | None) -> Tried:
    """`--try`: the first K verdicts' levers (or, with --fix, their edits) applied in runs of their own and timed
    (`trainspeed.tryout`)."""
    from trainspeed.tryout.runs import Script, try_levers

    def say(line: str) -> None:
        print(f"trainspeed doctor --try: {line}", file=sys.stderr, flush=True)

    return try_levers(report.verdicts, Script(target, script_args, module, args.steps, args.warmup), args.try_k,
                      args.rounds or DEFAULT_ROUNDS, out=folder, say=say, patched=patched)


def _show(console: Console, report: DoctorReport, shown: bool, verbose: bool) -> None:
    """The report's view (the short screen, or with `--verbose` every figure); only the tried table where the
    diagnosis was shown before the tries."""
    from rich.console import Group

    from trainspeed.report.tried import tried_view

    if shown and report.tried is not None:
        console.print(Group(*tried_view(report.tried)))
    elif verbose:
        from trainspeed.report.doctor_text import doctor_view

        console.print(doctor_view(report))
    else:
        console.print(report)  # the report renders itself (report/views.py)
