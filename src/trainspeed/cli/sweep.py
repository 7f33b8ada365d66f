"""`trainspeed sweep KNOB --workload SPEC`: controlled experiments over one knob of a training loop."""

from __future__ import annotations

import argparse
import io
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from trainspeed._io import check_writable_file, emit, new_run_dir, write_atomic
from trainspeed.cli._common import add_json_option, console_for, line_console, positive_int, script_target
from trainspeed.errors import UsageError
from trainspeed.names import KNOB_SUMMARIES, SWEEP_REPEATS, SWEEP_STEPS, SWEEP_WARMUP, WORKLOAD_NAMES

if TYPE_CHECKING:
    from trainspeed.sweep.result import SweepResult, Trial


def add_parser(sub: argparse._SubParsersAction) -> None:
    knobs = "; ".join(f"{name}: {summary}" for name, summary in KNOB_SUMMARIES.items())
    p = sub.add_parser("sweep", help="turn one knob of a training loop and measure each value",
                       description="Controlled experiments: warm-up, repeats interleaved across values, median and "
                                   "95% bootstrap interval per value, 'no measurable difference' when intervals "
                                   "overlap. Trials are appended to DIR/trials.jsonl; an interrupted sweep resumes. "
                                   f"Knobs - {knobs}.")
    p.add_argument("knob", metavar="KNOB", help=f"one of {', '.join(KNOB_SUMMARIES)}")
    p.add_argument("--workload", metavar="SPEC",
                   help=f"a built-in ({', '.join(WORKLOAD_NAMES)}; sized like mlp:width=1024,batch=256) or "
                        "FILE.py:FACTORY returning a trainspeed.Workload (or a script after --: threads, workers)")
    p.add_argument("--values", metavar="A,B,C", help="values to try (default: the knob's values for this machine)")
    p.add_argument("--steps", type=positive_int, default=SWEEP_STEPS,
                   help=f"optimizer steps per timed trial (default {SWEEP_STEPS})")
    p.add_argument("--repeats", type=positive_int, default=SWEEP_REPEATS,
                   help=f"timed trials per value (default {SWEEP_REPEATS})")
    p.add_argument("--warmup", type=positive_int, default=SWEEP_WARMUP,
                   help=f"untimed steps when each value's loop is built (default {SWEEP_WARMUP})")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="where the loop trains (default cpu)")
    p.add_argument("--save-every", type=positive_int, default=None, metavar="N",
                   help="checkpoint-save: save every N steps (default steps/5)")
    p.add_argument("--batches", default=None, metavar="B1,B2,...",
                   help="crossover: the batch sizes of the grid (default 16,128,1024)")
    p.add_argument("--gpu", default="RTX 3080", metavar="NAME",
                   help="device/crossover without CUDA: the GPU whose step time is predicted (default RTX 3080)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="folder for trials.jsonl, sweep.json, sweep.png, table.txt "
                        "(default trainspeed-out/sweep-KNOB-WORKLOAD, or a numbered sibling of it per "
                        "configuration; the journal of the same configuration there is resumed)")
    p.add_argument("--fresh", action="store_true",
                   help="do not resume: set the folder's journal and results aside (renamed) and start over")
    p.add_argument("-m", dest="module", metavar="MODULE", help="sweep a module's training, like python -m")
    add_json_option(p)
    p.add_argument("script", nargs="?", metavar="-- SCRIPT ARGS",
                   help="your training script and its arguments, after -- (threads, workers): each value a run of it "
                        "with that setting")
    p.set_defaults(run=run, args=[])


def _batches(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise UsageError(f"--batches: expected positive integers separated by commas, got {text!r}")
    return sorted(set(values))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_")[:80] or "workload"


OUTPUTS = ("trials.jsonl", "sweep.json", "sweep.png", "table.txt")


def _folder(args: argparse.Namespace, knob: str, sig: dict[str, Any]) -> Path:
    """Where this sweep's files go: one folder per configuration (knob, workload, steps, device, ...), so that a
    sweep run with other settings never overwrites another's results. The default folder, or the first of its
    numbered siblings that holds this configuration or nothing; --out as given, refused where it holds another
    configuration (unless --fresh sets that aside)."""
    from trainspeed.sweep.journal import Journal

    def other_config(folder: Path) -> bool:
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"--out {folder}: not a folder")
        return Journal(folder / "trials.jsonl", sig).recorded() == (0, True)

    if args.out:
        folder = Path(args.out)
        if other_config(folder) and not args.fresh:
            raise UsageError(f"--out {folder} holds a sweep of another configuration (other knob, workload, steps or "
                             "device): give another --out, or --fresh to set its files aside")
        return folder
    base = Path("trainspeed-out") / f"sweep-{knob}-{_slug(args.workload)}"
    for n in range(1, 1000):
        folder = base if n == 1 else base.with_name(f"{base.name}-{n}")
        if args.fresh or not other_config(folder):
            return folder
    raise UsageError(f"no free folder for this sweep beside {base}")


def _set_aside(folder: Path) -> None:
    """--fresh: the folder's journal and results renamed with the time, never deleted."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for name in (*OUTPUTS, "runs"):
        path = folder / name
        if path.exists():
            path.rename(folder / f"{path.stem}-{stamp}{path.suffix}")


def _script_folder(args: argparse.Namespace) -> Path:
    """A script sweep's folder: a new one under trainspeed-out, or --out, refused where it holds a sweep already
    (unless --fresh sets its files aside) or is no folder."""
    if not args.out:
        return new_run_dir("trainspeed-out", f"sweep-{args.knob}")
    folder = Path(args.out)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder}: not a folder")
    if any((folder / name).exists() for name in (*OUTPUTS, "runs")):
        if not args.fresh:
            raise UsageError(f"--out {folder} holds a sweep already: give another --out, or --fresh to set its files "
                             "aside")
        _set_aside(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create --out folder {folder}: {e.strerror}") from None
    return folder


def _given(args: argparse.Namespace, name: str) -> bool:
    return getattr(args, name) != SCRIPT_DEFAULTS.get(name)


SCRIPT_DEFAULTS = {"steps": SWEEP_STEPS, "repeats": SWEEP_REPEATS, "warmup": SWEEP_WARMUP}
SCRIPT_ROUNDS = 3
"""Rounds of runs of a script per value (each a process of its own): --repeats, else this."""


def run_script(args: argparse.Namespace, target: str, script_args: list[str], module: bool) -> int:
    """`sweep threads|workers -- SCRIPT`: each value a run of the script, alternated with the script as run."""
    import psutil

    from trainspeed.sweep.script import script_values, sweep_script
    from trainspeed.tryout.runs import Script

    for flag in ("device", "save_every", "batches"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag.replace('_', '-')} is for a built-in workload, not a script")
    if args.json:
        check_writable_file(args.json)
    values = script_values(args.knob, args.values, psutil.cpu_count() or 1)
    steps = args.steps if _given(args, "steps") else None
    rounds = args.repeats if _given(args, "repeats") else SCRIPT_ROUNDS
    folder = _script_folder(args)
    lines = line_console()

    def say(line: str) -> None:
        if lines is not None:
            lines.print(f"trainspeed sweep: {line}", markup=False)
        else:
            print(f"trainspeed sweep: {line}", file=sys.stderr, flush=True)

    result = sweep_script(args.knob, Script(target, script_args, module, steps, args.warmup), values, rounds,
                          folder / "runs", say)
    return _written(args, folder, result, {"json": "sweep.json", "png": "sweep.png", "table": "table.txt"})


def check(args: argparse.Namespace) -> tuple[str, list[str], bool] | None:
    """What the parser cannot say: one of --workload and a script, the script there, a knob it takes. The script's
    target, its arguments and whether it is a module, for a sweep of a script; None for a built-in workload's."""
    if args.script or args.module:
        if args.workload:
            raise UsageError("give --workload SPEC or a script, not both")
        from trainspeed.sweep.script import check_knob

        check_knob(args.knob)
        return script_target(args)
    if not args.workload:
        raise UsageError("give --workload SPEC (a built-in or FILE.py:FACTORY), or `-- SCRIPT` for threads or workers")
    return None


def run(args: argparse.Namespace) -> int:
    script = check(args)
    if script is not None:
        return run_script(args, *script)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from trainspeed.sweep.journal import Journal
    from trainspeed.sweep.sweep import execute, plan, signature

    if args.json:
        check_writable_file(args.json)
    knob, ctx = plan(args.knob, args.workload, args.values, args.steps, args.device, args.save_every,
                     _batches(args.batches), args.gpu)
    sig = signature(knob, ctx, args.warmup)
    folder = _folder(args, knob.name, sig)
    folder.mkdir(parents=True, exist_ok=True)
    journal = folder / "trials.jsonl"
    if args.fresh:
        _set_aside(folder)
    else:
        resumed, _ = Journal(journal, sig).recorded()
        if resumed:
            trials = "trial" if resumed == 1 else "trials"
            console_for(args).print(f"resuming: {resumed} {trials} of this configuration read back from {journal} "
                                    "(--fresh starts over)", style="dim")

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(f"{knob.name} on {args.workload}", total=None)

        lines = line_console()

        def on_trial(t: Trial, done: int, total: int) -> None:
            progress.update(task, completed=done, total=total, description=f"{knob.name} = {t.value}")
            if lines is not None:
                took = f"{t.seconds:.3f} s" if t.seconds is not None else f"failed: {t.error}"
                lines.print(f"trial {done} of {total}: {knob.name} = {t.value}, {took}", markup=False)

        result = execute(knob, ctx, args.repeats, args.warmup, journal, on_trial)

    return _written(args, folder, result, {"journal": journal.name, "json": "sweep.json", "png": "sweep.png",
                                           "table": "table.txt"})


def _written(args: argparse.Namespace, folder: Path, result: SweepResult, files: dict[str, str]) -> int:
    """The sweep's files written in `folder` (its plot, its table as plain text, its JSON naming them), --json, and
    its view shown."""
    from trainspeed.report.json import dumps, sweep_dict
    from trainspeed.report.plots import sweep_png
    from trainspeed.report.text import sweep_view

    payload = sweep_dict(result)
    write_atomic(folder / files["png"], sweep_png(result))
    view = sweep_view(result)
    plain = Console(width=110, record=True, file=io.StringIO())  # renders the table as plain text
    plain.print(view)
    write_atomic(folder / files["table"], plain.export_text())
    write_atomic(folder / files["json"], dumps({**payload, "files": files}))
    if args.json:
        emit(args.json, dumps(payload))
    console = console_for(args)
    console.print(view)
    console.print(f"Wrote {folder}")
    return 0
