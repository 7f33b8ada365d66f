"""`trainspeed doctor`: run a training script unchanged, split every step, name the bottleneck."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from trainspeed._io import check_writable_file, new_run_dir, write_atomic
from trainspeed.cli._common import add_json_option, console_for, non_negative_int, positive_int
from trainspeed.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from trainspeed.diagnose.tried import Tried
    from trainspeed.doctor import DoctorReport

INTERRUPTED = 130
"""The exit status after Ctrl-C stopped the tries (the diagnosis and what they measured are still written)."""
DEFAULT_ROUNDS = 3
"""`--try`'s rounds when --rounds is not given."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="watch a training script, split each step, name the bottleneck",
                       description="Run SCRIPT (or -m MODULE) exactly as python would, watch every training "
                                   "step, and report where the time goes and what to change.")
    p.add_argument("--steps", type=positive_int, help="stop the script cleanly after N training steps")
    p.add_argument("--warmup", type=non_negative_int, default=3, help="steps left out of the statistics (default 3)")
    p.add_argument("--html", metavar="PATH", help="write a self-contained HTML report")
    p.add_argument("--out", metavar="DIR", help="write doctor.json and report.html into a new folder under DIR")
    p.add_argument("--trace", metavar="PATH", help="write the kept steps' timeline as a Chrome/Perfetto trace-event "
                                                  "JSON (ui.perfetto.dev, chrome://tracing)")
    p.add_argument("--try", dest="try_k", type=positive_int, nargs="?", const=2, metavar="K",
                   help="then apply the first K verdicts' levers (default 2) in runs of their own, each timed against "
                        "runs without it, alternated, and show the measured speed-ups beside the predictions")
    p.add_argument("--rounds", type=positive_int, metavar="R",
                   help=f"with --try: rounds of runs (one plain, one per lever; default {DEFAULT_ROUNDS})")
    p.add_argument("--verbose", action="store_true",
                   help="every figure: the places by line, and each verdict's whole evidence and action")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module, like python -m")
    add_json_option(p)
    p.add_argument("script", nargs="?", metavar="SCRIPT", help="the training script")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the script")
    p.set_defaults(run=run)


def _target(args: argparse.Namespace) -> tuple[str, list[str], bool]:
    if args.module:
        script_args = ([args.script] if args.script else []) + list(args.args)
        try:
            found = importlib.util.find_spec(args.module)
        except (ImportError, ValueError):  # a dotted name whose package is missing, or an empty name
            found = None
        if found is None:
            raise UsageError(f"-m {args.module}: no such module")
        return args.module, script_args, True
    if not args.script:
        raise UsageError("give a SCRIPT to run (or -m MODULE)")
    script, script_args = args.script, list(args.args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    if script == "--":
        if not script_args:
            raise UsageError("give a SCRIPT to run after --")
        script, script_args = script_args[0], script_args[1:]
    from trainspeed.watch.runner import check_script

    return str(check_script(script)), script_args, False


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
    from trainspeed.report.files import write_doctor_report
    from trainspeed.report.trace import chrome_trace

    target, script_args, module = _target(args)
    if args.rounds is not None and not args.try_k:
        raise UsageError("--rounds goes with --try")
    if args.try_k and "WORLD_SIZE" in os.environ:
        raise UsageError("--try runs the script again on its own; run it without torchrun")
    for path in (args.json, args.html, args.trace):
        if path:
            check_writable_file(path)
    folder = new_run_dir(args.out, "doctor") if args.out and not _launch_rank() else None

    # with --json -, stdout carries the JSON: the script's own prints go to stderr meanwhile
    redirect = contextlib.redirect_stdout(sys.stderr) if args.json == "-" else contextlib.nullcontext()
    with redirect:
        watcher, outcome, process_s = watch_script(target, script_args, module, warmup=args.warmup, steps=args.steps,
                                                   trace=bool(args.trace))
    rank = _launch_rank()
    if rank:  # under torchrun every rank watches itself; rank 0 gathers them and reports for all
        print(f"trainspeed doctor: rank {rank} watched its steps; rank 0 reports for every rank", file=sys.stderr)
        return outcome.exit_code
    report = dataclasses.replace(script_report(watcher, outcome, process_s, f"-m {target}" if module else target),
                                 command=shlex.join(["trainspeed", *getattr(args, "argv", ["doctor"])]),
                                 when=time.strftime("%Y-%m-%d %H:%M"))

    console = console_for(args)
    shown = False
    if args.try_k and outcome.exit_code == 0:
        _show(console, report, shown=False, verbose=args.verbose)  # the diagnosis first: the tries take a while
        shown = True
        report = dataclasses.replace(report, tried=_try(report, args, target, script_args, module, folder))
    elif args.try_k:
        from trainspeed.diagnose.tried import Tried

        report = dataclasses.replace(report, tried=Tried(
            [], [], args.rounds or DEFAULT_ROUNDS, args.steps, 0.0,
            notes=[f"nothing tried: the script ended with status {outcome.exit_code}"]))
    try:
        if args.trace:
            trace = chrome_trace(report.watch, f"trainspeed doctor: {report.script}")
            write_atomic(args.trace, json.dumps(trace, separators=(",", ":"), allow_nan=False) + "\n")
        write_doctor_report(report, folder=folder, html=args.html, json=args.json)
    except UsageError as e:  # the run is done: its summary and its report are not lost with the file
        _show(console, report, shown, args.verbose)
        raise UsageError(f"{e}; the report was saved to {_rescue(report)} instead") from None
    _show(console, report, shown, args.verbose)
    if folder is not None:
        console.print(f"Wrote {folder}" + (f" (a verdict's whole evidence: trainspeed explain ID {folder})"
                                           if report.verdicts else ""), style="dim")
    if report.tried is not None and report.tried.interrupted:
        return INTERRUPTED
    return outcome.exit_code


def _try(report: DoctorReport, args: argparse.Namespace, target: str, script_args: list[str], module: bool,
         folder: Path | None) -> Tried:
    """`--try`: the first K verdicts' levers applied in runs of their own and timed (`trainspeed.tryout`)."""
    from trainspeed.tryout.runs import Script, try_levers

    def say(line: str) -> None:
        print(f"trainspeed doctor --try: {line}", file=sys.stderr, flush=True)

    return try_levers(report.verdicts, Script(target, script_args, module, args.steps, args.warmup), args.try_k,
                      args.rounds or DEFAULT_ROUNDS, out=folder, say=say)


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
